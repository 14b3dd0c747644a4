"""Issue 44: the keys page and a route's admin page show, for a route whose upstream speaks Anthropic's Messages
API, the two variables Claude Code needs (ANTHROPIC_BASE_URL with this server's host, and the key), with a copy
button; what the page says works against the gateway."""

from __future__ import annotations

import re

import pytest

from tests.gateway_app.conftest import call
from tests.gateway_app.test_anthropic_gateway import Claude, claude_route
from tests.gateway_app.test_setup_pages import _blocks

pytestmark = pytest.mark.django_db(transaction=True)


def _exports(block: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S+)", block, re.M))


def test_the_keys_page_shows_claude_codes_variables_with_this_host_and_the_new_key_and_they_work(
        anthropic_upstream, client, operator_user):
    route = claude_route(name="claude-team")
    route.allow_user_keys = True
    route.save()
    client.force_login(operator_user)
    page = client.get("/gateway-keys/").content.decode()
    env = _exports(_blocks(page)[f"claude-code-env-{route.name}"])
    assert env == {"ANTHROPIC_BASE_URL": f"http://testserver/gateway/r/{route.name}/anthropic",
                   "ANTHROPIC_API_KEY": "cwg_your_key"}
    assert f'data-copy="#claude-code-env-{route.name}"' in page
    assert f"codex-builtin-{route.name}" not in page  # Codex cannot use a Messages-API route

    made = client.post("/gateway-keys/", {"name": "laptop"}).content.decode()
    env = _exports(_blocks(made)[f"claude-code-env-{route.name}"])
    key = re.search(r"(cwg_[A-Za-z0-9_-]{20,})", made).group(1)
    assert env["ANTHROPIC_API_KEY"] == key

    # What the page says is what works: Claude Code appends /v1/messages to ANTHROPIC_BASE_URL.
    claude = Claude(env["ANTHROPIC_API_KEY"],
                    path=env["ANTHROPIC_BASE_URL"].removeprefix("http://testserver") + "/v1/messages")
    claude.turn("fix the parser")
    assert call("POST", claude.path, json=claude.body(claude.messages),
                headers={"x-api-key": "cwg_wrong"}).status_code == 401


def test_the_routes_admin_page_shows_claude_codes_variables_for_an_anthropic_route(admin_client):
    route = claude_route(name="claude-admin")
    page = admin_client.get(f"/admin/gateway_app/gatewayroute/{route.pk}/change/").content.decode()
    assert 'id="gateway-route-claude-code-config"' in page and "js/copy.js" in page
    env = _exports(_blocks(page)[f"claude-code-env-{route.name}"])
    assert env["ANTHROPIC_BASE_URL"] == f"http://testserver/gateway/r/{route.name}/anthropic"
    assert 'id="gateway-route-codex-config"' not in page
