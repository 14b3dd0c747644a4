"""Issue 14: provider URLs are checked when written (not when the next turn fails with a 500). Issue 27: private,
loopback and link-local hosts are refused by default (COMPACTWEB_OUTBOUND_DENY_PRIVATE, on) unless the deployment
lists them (COMPACTWEB_OUTBOUND_ALLOW), and a row saved before is refused again when a turn would send to it.

The suite's conftest lists loopback for its scripted servers; these tests set the list they need."""

from __future__ import annotations

import pytest

from compaction_app.models import Provider
from compaction_app.providers.outbound import url_problem


def body(base_url):
    return {"name": "p-url", "base_url": base_url, "model": "m"}


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "gopher://127.0.0.1:6379/_FLUSHALL", "javascript:alert(1)", "ftp://example.invalid/",
    "http://", "https://user:pw@api.example.invalid/v1", "http://api.example.invalid:99999/",
    "https://api.example.invalid/v1\r\nX-Injected: 1", "",
])
def test_the_api_refuses_a_url_the_server_must_not_call_and_stores_nothing(admin_api, url):
    response = admin_api.post("/api/v1/providers", body(url), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"].startswith("base_url:")
    assert not Provider.objects.filter(name="p-url").exists()


@pytest.mark.parametrize("url", ["embedded", "https://api.example.invalid/v1", "http://93.184.216.34/v1"])
def test_embedded_and_public_urls_are_accepted_by_default(admin_api, settings, url):
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    assert admin_api.post("/api/v1/providers", body(url), format="json").status_code == 201


PRIVATE_URLS = [
    "http://127.0.0.1:8000/sim/v1", "http://localhost/", "http://10.0.0.5/", "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/", "http://[::1]:8000/", "http://[::ffff:127.0.0.1]/",
    "http://0.0.0.0/", "http://app.localhost/", "http://LOCALHOST:8000/", "http://127.1/", "http://2130706433/",
]


@pytest.mark.parametrize("url", PRIVATE_URLS)
def test_by_default_a_loopback_private_or_link_local_host_is_refused_and_nothing_stored(admin_api, settings, url):
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    response = admin_api.post("/api/v1/providers", body(url), format="json")
    assert response.status_code == 400, response.content
    message = response.json()["error"]["message"]
    assert message.startswith("base_url:") and "COMPACTWEB_OUTBOUND_ALLOW" in message
    assert not Provider.objects.filter(name="p-url").exists()


@pytest.mark.parametrize(("allow", "url", "accepted"), [
    (["127.0.0.1:8000"], "http://127.0.0.1:8000/sim/v1", True),
    (["127.0.0.1:8000"], "http://127.0.0.1:8001/sim/v1", False),  # another port of the same host
    (["127.0.0.1"], "http://127.0.0.1:9999/v1", True),
    (["localhost:11434"], "http://localhost:11434/v1", True),
    (["[::1]:8000"], "http://[::1]:8000/v1", True),
    (["10.1.0.0/16"], "http://10.1.2.3/v1", True),
    (["10.1.0.0/16"], "http://10.2.0.1/v1", False),
    (["10.1.0.0/16"], "http://169.254.169.254/", False),
])
def test_the_allow_list_opens_exactly_the_hosts_ports_and_networks_it_names(admin_api, settings, allow, url,
                                                                             accepted):
    settings.COMPACTWEB_OUTBOUND_ALLOW = allow
    response = admin_api.post("/api/v1/providers", body(url), format="json")
    assert response.status_code == (201 if accepted else 400), response.content


def test_switching_deny_private_off_accepts_private_hosts(admin_api, settings):
    settings.COMPACTWEB_OUTBOUND_DENY_PRIVATE = False
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    assert admin_api.post("/api/v1/providers", body("http://10.0.0.5/v1"), format="json").status_code == 201


def test_the_embedded_model_is_not_a_url_and_always_works(admin_api, settings):
    settings.COMPACTWEB_OUTBOUND_ALLOW = []
    assert admin_api.post("/api/v1/providers", body("embedded"), format="json").status_code == 201


def test_a_provider_saved_before_the_rule_is_refused_when_a_turn_would_send(scripted_sessions, settings):
    """The scripted provider listens on 127.0.0.1; once the deployment no longer lists loopback, a turn sends
    nothing there (no request reaches it, no key is read) and fails with the reason; history stays as it was."""
    from tests.fakes.scripted_api import text_reply

    session = scripted_sessions.create()
    scripted_sessions.script.add(text_reply("never sent"))
    before = scripted_sessions.api.get(f"/api/v1/sessions/{session['id']}/history").json()["items"]
    settings.COMPACTWEB_OUTBOUND_ALLOW = []

    response = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/turns", {"input": "hi"},
                                          format="json")

    assert response.status_code == 200, response.content
    result = response.json()
    assert result["status"] == "failed" and "COMPACTWEB_OUTBOUND_ALLOW" in result["error"]["message"]
    assert scripted_sessions.script.requests == []
    settings.COMPACTWEB_OUTBOUND_ALLOW = ["127.0.0.1"]
    scripted_sessions.script.add(text_reply("sent"))
    again = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/turns", {"input": "hi"}, format="json")
    assert again.json()["status"] == "completed" and len(scripted_sessions.script.requests) == 1
    assert before == scripted_sessions.api.get(f"/api/v1/sessions/{session['id']}/history").json()["items"][
        :len(before)]


def test_deny_private_checks_every_address_a_name_resolves_to():
    def resolver(host):
        return {"public.example": ["93.184.216.34"], "rebind.example": ["93.184.216.34", "10.1.2.3"]}[host]

    assert url_problem("https://public.example/v1", deny_private=True, resolver=resolver) is None
    assert "10.1.2.3" in url_problem("https://rebind.example/v1", deny_private=True, resolver=resolver)
    assert url_problem("https://rebind.example/v1", deny_private=True, allow=["10.0.0.0/8"],
                       resolver=resolver) is None

    def unresolvable(host):
        raise OSError("no such host")

    # Nothing to reach: accepted, and checked again before each send (when it must resolve to allowed addresses).
    assert url_problem("https://nowhere.example/", deny_private=True, resolver=unresolvable) is None
