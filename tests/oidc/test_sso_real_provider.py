"""Single sign-on (issue 45) against a real OpenID Provider the test starts: the certified `oidc-provider` (pinned in
tests/oidc/package.json, installed by scripts/test with `npm ci`) run with node. The full authorization-code flow
over real HTTP: compactweb's /oidc/authenticate/ redirects to the provider, the provider's own login and consent
pages are submitted, its redirect comes back to /oidc/callback/, where compactweb exchanges the code at the
provider's token endpoint, checks the ID token against the provider's keys and reads the userinfo claims. The role
follows the groups claim at every sign-in; the open websocket of a user removed from the group closes; the local
break-glass admin still logs in with a password and cannot be taken over through the provider."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from html import unescape
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, User
from django.test import Client

from compactweb.roles import ROLES, role_of
from sessions_app.live.pools import IDLE_CLOSE_SECONDS
from tests.live_dashboard import free_port

HERE = Path(__file__).resolve().parent
OP_SCRIPT = HERE / "op.mjs"
INSTALLED = HERE / "node_modules" / "oidc-provider" / "package.json"
PINNED = json.loads((HERE / "package.json").read_text())["devDependencies"]["oidc-provider"]
CLIENT_ID, CLIENT_SECRET = "compactweb", "a-client-secret-for-tests-only"
CALLBACK = "http://testserver/oidc/callback/"
ROLE_GROUPS = "admin=cw-admins,support=cw-support,operator=cw-operators"

pytestmark = pytest.mark.django_db(transaction=True)


def _provider_or_skip() -> None:
    problem = None
    if shutil.which("node") is None:
        problem = "node is not installed"
    elif not INSTALLED.exists() or json.loads(INSTALLED.read_text())["version"] != PINNED:
        problem = f"oidc-provider {PINNED} is not installed: run `npm ci --prefix tests/oidc` (scripts/test does)"
    if problem is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; CI must run the single sign-on test")
    pytest.skip(problem)


class Provider:
    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.accounts = work / "accounts.json"
        self.log = work / "op.log"
        self.redirect_uri = CALLBACK
        self.process: subprocess.Popen | None = None

    def set_groups(self, username: str, *groups: str) -> None:
        accounts = json.loads(self.accounts.read_text()) if self.accounts.exists() else {}
        accounts[username] = {"email": f"{username}@example.com", "groups": list(groups)}
        self.accounts.write_text(json.dumps(accounts))

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["node", str(OP_SCRIPT), str(self.port), CLIENT_ID, CLIENT_SECRET, self.redirect_uri, str(self.accounts)],
            cwd=HERE, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(self.log.read_text()[-2000:])
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def provider(tmp_path, settings):
    _provider_or_skip()
    op = Provider(tmp_path)
    op.set_groups("alice", "cw-operators", "unrelated-team")
    op.start()
    discovery = httpx.get(f"{op.issuer}/.well-known/openid-configuration").json()
    settings.COMPACTWEB_OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = discovery["authorization_endpoint"]
    settings.OIDC_OP_TOKEN_ENDPOINT = discovery["token_endpoint"]
    settings.OIDC_OP_USER_ENDPOINT = discovery["userinfo_endpoint"]
    settings.OIDC_OP_JWKS_ENDPOINT = discovery["jwks_uri"]
    settings.COMPACTWEB_OIDC_ROLE_GROUPS = ROLE_GROUPS
    settings.AUTHENTICATION_BACKENDS = ["compactweb.login_limits.LoginRateLimitBackend",
                                        "compactweb.oidc.RoleMappingBackend",
                                        "django.contrib.auth.backends.ModelBackend"]
    for name in ROLES:  # a transactional test's flush empties the groups the migration made
        Group.objects.get_or_create(name=name)
    yield op
    op.stop()


def _form(html: str) -> tuple[str, dict[str, str]]:
    action = unescape(re.search(r'<form[^>]*action="([^"]+)"', html).group(1))
    fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html))
    return action, fields


def sign_in(client: Client, username: str) -> str:
    """The authorization-code flow, end to end: compactweb → the provider's login and consent pages → compactweb's
    callback. Returns where compactweb sent the browser at the end."""
    start = client.get("/login/")
    assert "Sign in with single sign-on" in start.content.decode()
    answer = client.get("/oidc/authenticate/")
    assert answer.status_code == 302
    location = answer["Location"]
    assert location.startswith(f"{client.provider_issuer}/auth?") and "code_challenge=" in location
    with httpx.Client(follow_redirects=False, timeout=10) as browser:
        for _ in range(12):  # the provider's redirects and its two interaction pages
            if location.startswith("http://testserver/"):
                break
            page = browser.get(location)
            if page.status_code in (302, 303):
                location = urljoin(location, page.headers["location"])
                continue
            assert page.status_code == 200, page.text
            action, fields = _form(page.text)
            if 'name="login"' in page.text:  # the provider's login page (any password in development mode)
                fields.update(login=username, password="anything")
            posted = browser.post(urljoin(location, action), data=fields)
            assert posted.status_code in (302, 303), posted.text
            location = urljoin(location, posted.headers["location"])
        else:
            raise AssertionError(f"the provider never sent the browser back: {location}")
    back = urlsplit(location)
    assert back.path == "/oidc/callback/"
    done = client.get(f"{back.path}?{back.query}")
    assert done.status_code == 302
    return done["Location"]


def _client(op: Provider) -> Client:
    client = Client()
    client.provider_issuer = op.issuer
    return client


def test_a_user_signs_in_through_the_provider_with_the_role_of_their_group(provider):
    client = _client(provider)
    assert sign_in(client, "alice") == "/"
    alice = User.objects.get(username="alice")
    assert (role_of(alice), alice.email, alice.has_usable_password(), alice.is_staff) == (
        "operator", "alice@example.com", False, False)
    assert client.get("/").status_code == 200  # the fleet board, an operator's page

    provider.set_groups("alice", "cw-admins", "cw-operators")  # promoted: the highest role wins
    sign_in(_client(provider), "alice")
    alice = User.objects.get(username="alice")
    assert (role_of(alice), alice.is_staff) == ("admin", True)
    assert list(alice.groups.values_list("name", flat=True)) == ["admin"]


def test_a_user_removed_from_the_group_loses_the_role_at_the_next_sign_in(provider):
    sign_in(_client(provider), "alice")
    provider.set_groups("alice", "unrelated-team")
    client = _client(provider)
    sign_in(client, "alice")
    alice = User.objects.get(username="alice")
    assert role_of(alice) is None and not alice.groups.exists()
    assert client.get("/").status_code == 403


def test_the_local_break_glass_admin_logs_in_with_a_password_and_the_provider_cannot_take_it_over(provider):
    admin = User.objects.create_user("root-admin", password="a-long-break-glass-password", is_staff=True)
    admin.groups.add(Group.objects.get(name="admin"))
    local = Client()
    assert local.post("/login/", {"username": "root-admin", "password": "a-long-break-glass-password"}).status_code == 302
    assert local.get("/admin/").status_code == 200

    provider.set_groups("root-admin", "cw-operators")
    client = _client(provider)
    assert sign_in(client, "root-admin") == "/login/"  # refused: a local account has that username
    admin.refresh_from_db()
    assert role_of(admin) == "admin" and admin.check_password("a-long-break-glass-password")
    assert "_auth_user_id" not in client.session


def test_single_sign_on_answers_404_while_it_is_not_configured(settings):
    settings.COMPACTWEB_OIDC_ENABLED = False
    client = Client()
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "single sign-on" not in client.get("/login/").content.decode()


@pytest.mark.asyncio
async def test_an_open_websocket_closes_when_a_sign_in_takes_the_role_away(provider, settings):
    from channels.layers import channel_layers

    from compactweb.asgi import application
    from sessions_app.live.consumers import CLOSE_FORBIDDEN

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    watching = _client(provider)
    await database_sync_to_async(sign_in)(watching, "alice")
    cookie = (b"cookie", f"sessionid={watching.cookies['sessionid'].value}".encode())
    comm = WebsocketCommunicator(application, "/ws/fleet/",
                                 headers=[(b"host", b"localhost"), (b"origin", b"http://localhost"), cookie])
    connected, _ = await comm.connect(timeout=10)
    assert connected

    provider.set_groups("alice", "unrelated-team")
    await database_sync_to_async(sign_in)(_client(provider), "alice")  # signs in elsewhere, without the group
    message = await comm.receive_output(10)
    assert (message["type"], message["code"]) == ("websocket.close", CLOSE_FORBIDDEN)
    channel_layers.backends.clear()
    # The consumer's database pool closes its idle connections a second after its last call (sessions_app.live
    # .pools): let that happen while the test may still touch the database, not in the next test.
    await asyncio.sleep(IDLE_CLOSE_SECONDS + 0.5)
