"""Single sign-on in the browser (issue 45): chromium signs in to a live compactweb (Daphne) through a real OpenID
Provider (tests/oidc/op.mjs: the pinned oidc-provider run with node), clicking through compactweb's login page and
the provider's own login and consent pages; the role shown is the one the groups claim maps to, and a user taken
out of the group has no role at the next sign-in."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import serving
from tests.live_dashboard import free_port
from tests.oidc.test_sso_real_provider import (
    CLIENT_ID,
    CLIENT_SECRET,
    ROLE_GROUPS,
    Provider,
    _provider_or_skip,
)


@pytest.fixture
def sso_web(tmp_path, monkeypatch):
    """A live compactweb configured for single sign-on at a provider on a port chosen first, and that provider
    started once compactweb's callback address is known."""
    _provider_or_skip()
    op = Provider(tmp_path)
    op.port = free_port()
    op.issuer = f"http://127.0.0.1:{op.port}"
    op.set_groups("carol", "cw-support")
    for name, value in {
        "OIDC_RP_CLIENT_ID": CLIENT_ID, "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
        # oidc-provider's endpoint paths (its discovery document lists the same)
        "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{op.issuer}/auth", "OIDC_OP_TOKEN_ENDPOINT": f"{op.issuer}/token",
        "OIDC_OP_USER_ENDPOINT": f"{op.issuer}/me", "OIDC_OP_JWKS_ENDPOINT": f"{op.issuer}/jwks",
        "COMPACTWEB_OIDC_ROLE_GROUPS": ROLE_GROUPS,
    }.items():
        monkeypatch.setenv(name, value)
    with serving(tmp_path / "var") as web:
        op.redirect_uri = f"{web.url}/oidc/callback/"
        op.start()
        try:
            yield web, op
        finally:
            op.stop()


def sign_in(page, web, username: str) -> None:
    page.goto(f"{web.url}/login/")
    page.click("text=Sign in with single sign-on")
    page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/interaction/"))  # the provider's login page
    page.fill("input[name=login]", username)
    page.fill("input[name=password]", "any password: the provider's development login")
    page.click("button:has-text('Sign-in')")
    page.click("button:has-text('Continue')")  # the provider's consent page (waited for: only it has the button)
    page.wait_for_url(f"{web.url}/")


def test_a_user_signs_in_through_the_provider_in_the_browser_with_the_role_of_their_group(browser, sso_web):
    web, op = sso_web
    page = browser.new_context().new_page()
    sign_in(page, web, "carol")
    assert page.url == f"{web.url}/"
    assert page.inner_text(".who").split() == ["carol", "support"]
    assert page.locator("a", has_text="Audit log").count() == 1  # a support user's page

    op.set_groups("carol", "another-team")
    again = browser.new_context().new_page()
    sign_in(again, web, "carol")
    again.goto(f"{web.url}/")
    assert again.inner_text(".who").split() == ["carol"]  # signed in, no role any more
    assert again.locator("a", has_text="Audit log").count() == 0
