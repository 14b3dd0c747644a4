"""Seed the Claude Code gateway end-to-end test's server database (run in a subprocess before Daphne starts): the
dashboard's own /sim/anthropic as the upstream Provider (wire API `anthropic`, its key from COMPACTWEB_KEY_SIM), a
route per compaction mode with a key each (compactweb: a local-summarisation policy with the admin's own prompt),
and an operator with an API token. Prints what the test needs as JSON. Argument: the dashboard's port."""

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402

from compaction_app.models import CompactionPolicy, Provider  # noqa: E402
from compactweb.api_tokens import issue_token  # noqa: E402
from gateway_app.keys import do_create_gateway_key  # noqa: E402
from gateway_app.models import GatewayRoute  # noqa: E402

ADMIN_PROMPT = "Summarise this Claude Code session for the team: the files touched, the commands run, what is left."

port = int(sys.argv[1])
call_command("migrate", verbosity=0)
upstream = Provider.objects.create(name="dashboard-sim-anthropic", base_url=f"http://127.0.0.1:{port}/sim/anthropic",
                                   wire_api="anthropic", model="claude-sonnet-4-5", context_window=200_000,
                                   api_key_env="COMPACTWEB_KEY_SIM")
routes = {
    "upstream": GatewayRoute.objects.create(name="claude", provider=upstream, compaction_mode="upstream",
                                            policy=CompactionPolicy.objects.create(name="as-claude-code")),
    "compactweb": GatewayRoute.objects.create(
        name="claude-governed", provider=upstream, compaction_mode="compactweb",
        policy=CompactionPolicy.objects.create(name="team-summary", strategy="local", compact_prompt=ADMIN_PROMPT)),
}
operator = User.objects.create_user(username="ops", password="gateway-e2e-password")
operator.groups.add(Group.objects.get(name="operator"))
print(json.dumps({
    "keys": {mode: do_create_gateway_key(route=route, client_name=f"claude-{mode}").key
             for mode, route in routes.items()},
    "routes": {mode: route.name for mode, route in routes.items()},
    "token": issue_token(user=operator),
}))
