"""Issue 14: provider URLs are checked when written (not when the next turn fails with a 500), and deployments
may refuse private and loopback hosts (COMPACTWEB_OUTBOUND_DENY_PRIVATE)."""

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


@pytest.mark.parametrize("url", ["embedded", "https://api.example.invalid/v1", "http://127.0.0.1:8149/sim/v1"])
def test_embedded_and_http_urls_are_accepted_by_default(admin_api, url):
    assert admin_api.post("/api/v1/providers", body(url), format="json").status_code == 201


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8000/sim/v1", "http://localhost/", "http://10.0.0.5/", "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/", "http://[::1]:8000/", "http://[::ffff:127.0.0.1]/",
    "http://0.0.0.0/", "http://app.localhost/",
])
def test_with_deny_private_a_loopback_or_private_host_is_refused(admin_api, settings, url):
    settings.COMPACTWEB_OUTBOUND_DENY_PRIVATE = True
    response = admin_api.post("/api/v1/providers", body(url), format="json")
    assert response.status_code == 400, response.content
    assert "COMPACTWEB_OUTBOUND_DENY_PRIVATE" in response.json()["error"]["message"]


def test_with_deny_private_the_embedded_model_still_works(admin_api, settings):
    settings.COMPACTWEB_OUTBOUND_DENY_PRIVATE = True
    assert admin_api.post("/api/v1/providers", body("embedded"), format="json").status_code == 201


def test_deny_private_checks_every_address_a_name_resolves_to():
    def resolver(host):
        return {"public.example": ["93.184.216.34"], "rebind.example": ["93.184.216.34", "10.1.2.3"]}[host]

    assert url_problem("https://public.example/v1", deny_private=True, resolver=resolver) is None
    assert "10.1.2.3" in url_problem("https://rebind.example/v1", deny_private=True, resolver=resolver)

    def unresolvable(host):
        raise OSError("no such host")

    assert "does not resolve" in url_problem("https://nowhere.example/", deny_private=True, resolver=unresolvable)
