"""Prepare the embedded default for a first look: the simulated provider, a default policy, a demo admin, an example
summarisation prompt and a disabled example hook (so an admin sees what each can be), and the demo fleet.

Idempotent: run it again and the provider and policy stay as they are; the admin gets a fresh password, printed
once (it is stored only as a hash).
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils.crypto import get_random_string

from compaction_app.engine.prompts import SUMMARIZATION_PROMPT
from compaction_app.models import CompactionPolicy, Hook, Prompt, Provider
from compactweb.roles import ADMIN
from sessions_app.fleet.runtime import DEMO_FLEET, seed_demo_fleet

DEMO_PROVIDER = {
    "base_url": Provider.EMBEDDED,
    "model": "sim-1",
    "context_window": 32000,
    "wire_api": Provider.WireApi.RESPONSES,
    "remote_compaction": Provider.RemoteCompaction.V2,
    "encoding": Provider.Encoding.O200K,
}


EXAMPLE_PROMPT = "example: keep file paths and failing tests"
EXAMPLE_HOOK = "example: log each compaction"


def seed_examples() -> tuple[Prompt, Hook]:
    """An example stored summarisation prompt (Codex's own, with one line added) and a disabled PreCompact hook.
    Created once: an admin's edits are kept on the next run."""
    prompt, _ = Prompt.objects.get_or_create(name=EXAMPLE_PROMPT, defaults={
        "text": SUMMARIZATION_PROMPT.rstrip() + "\n\nAlways keep the exact file paths touched and the names of "
                                                  "failing tests.\n",
    })
    hook, _ = Hook.objects.get_or_create(name=EXAMPLE_HOOK, defaults={
        "event": Hook.Event.PRE_COMPACT, "kind": Hook.Kind.CALLABLE, "target": "compaction_app.example_hooks.log_compaction",
        "matcher": Hook.Matcher.ANY, "enabled": False,
    })
    return prompt, hook


class Command(BaseCommand):
    help = "Create the embedded simulated provider, a default policy and the demo admin user (prints the login)."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="The address printed for the dashboard.")
        parser.add_argument("--username", default="admin")
        parser.add_argument("--no-fleet", action="store_true", help="Do not seed the demo fleet of simulated sessions.")

    def handle(self, *args, url: str, username: str, no_fleet: bool = False, **options):
        with transaction.atomic():
            provider, _ = Provider.objects.get_or_create(name="embedded", defaults=DEMO_PROVIDER)
            CompactionPolicy.objects.get_or_create(name="default", defaults={})
            User = get_user_model()
            user, _ = User.objects.get_or_create(username=username)
            password = get_random_string(20)
            user.set_password(password)
            user.is_staff = True
            user.is_active = True
            user.save()
            user.groups.add(Group.objects.get(name=ADMIN))
            policy = CompactionPolicy.objects.get(name="default")
            prompt, hook = seed_examples()
            # The demo fleet the embedded simulator drives (seeded once; sessions_app.fleet.runtime.seed_demo_fleet).
            fleet_runs = [] if no_fleet else seed_demo_fleet(provider=provider, policy=policy, actor=user)
        self.stdout.write(f"embedded provider: {provider.name} (model {provider.model}, window {provider.context_window})")
        if fleet_runs:
            self.stdout.write(f"demo fleet: {len(fleet_runs)} simulated sessions ({', '.join(DEMO_FLEET)})")
        self.stdout.write(f"examples for admins: prompt {prompt.name!r}, hook {hook.name!r} (disabled)")
        self.stdout.write(f"dashboard: {url}")
        self.stdout.write(f"login: {username} / {password}")
