"""Setting the gateway up from the pages (issue 47, item 5): the keys page and the route's admin page show the exact
Codex config.toml for both forms, with this server's host and the key's environment variable, each with a copy
button; the config read back from the page reaches the route; help texts keep their placeholders."""

from __future__ import annotations

import html
import re
import tomllib

import pytest

from compaction_app.models import Provider
from tests.gateway_app.conftest import call, make_route
from tests.gateway_app.test_proxy import BASE, meta, user

pytestmark = pytest.mark.django_db(transaction=True)


def _blocks(page: str) -> dict[str, str]:
    """The text of every <pre id=...> block of the page, unescaped, by id."""
    return {m.group(1): html.unescape(re.sub(r"<[^>]+>", "", m.group(2)))
            for m in re.finditer(r'<pre id="([^"]+)"[^>]*>(.*?)</pre>', page, re.S)}


def test_the_keys_page_shows_both_codex_configs_with_this_host_and_the_new_key_and_they_work(
    sim_upstream, client, operator_user
):
    route = make_route(rpm=611)
    route.allow_user_keys = True
    route.save()
    client.force_login(operator_user)
    base_url = f"http://testserver/gateway/r/{route.name}/v1"

    page = client.get("/gateway-keys/").content.decode()
    blocks = _blocks(page)
    builtin = tomllib.loads(blocks[f"codex-builtin-{route.name}"])
    assert builtin == {"model": "compactweb-sim", "model_provider": "openai", "openai_base_url": base_url}
    custom = tomllib.loads(blocks[f"codex-custom-{route.name}"])
    assert custom["model_provider"] == route.name
    assert custom["model_providers"][route.name] | {} == {
        "name": f"compactweb gateway ({route.name})", "base_url": base_url, "wire_api": "responses",
        "env_key": "COMPACTWEB_GATEWAY_KEY"}
    for block in ("codex-builtin", "codex-builtin-env", "codex-custom", "codex-custom-env"):
        assert f'data-copy="#{block}-{route.name}"' in page
    assert "export COMPACTWEB_GATEWAY_KEY=cwg_your_key" in blocks[f"codex-custom-env-{route.name}"]

    made = client.post("/gateway-keys/", {"name": "laptop"}).content.decode()
    key = re.search(r"(cwg_[A-Za-z0-9_-]{20,})", made).group(1)
    env = _blocks(made)[f"codex-custom-env-{route.name}"]
    assert env.strip() == f"export COMPACTWEB_GATEWAY_KEY={key}"
    assert f"export OPENAI_API_KEY={key}" in _blocks(made)[f"codex-builtin-env-{route.name}"]

    # What the page says is what works: the config's base URL and the key reach the route.
    path = custom["model_providers"][route.name]["base_url"].removeprefix("http://testserver") + "/responses"
    body = {"model": custom["model"], "stream": True, "input": [BASE, user("fix the parser")]}
    answer = call("POST", path, json=body,
                  headers={"Authorization": f"Bearer {key}", **meta("0190eeee-0000-7000-8000-0000000000aa")})
    assert answer.status_code == 200


def test_the_routes_admin_page_shows_the_codex_config_and_help_texts_keep_their_placeholders(admin_client):
    route = make_route(rpm=612)
    page = admin_client.get(f"/admin/gateway_app/gatewayroute/{route.pk}/change/").content.decode()
    assert 'id="gateway-route-codex-config"' in page
    blocks = _blocks(page)
    custom = tomllib.loads(blocks[f"codex-custom-{route.name}"])
    assert custom["model_providers"][route.name]["base_url"] == f"http://testserver/gateway/r/{route.name}/v1"
    assert "js/copy.js" in page
    assert "at /gateway/r/&lt;name&gt;/v1" in page and "/gateway/r//v1" not in page

    provider = Provider.objects.first()
    provider_page = admin_client.get(f"/admin/compaction_app/provider/{provider.pk}/change/").content.decode()
    assert "model_providers.&lt;id&gt;.base_url" in provider_page and "model_providers..base_url" not in provider_page
