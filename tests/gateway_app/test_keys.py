"""Issue 29: gateway keys are created by a management command (printed once) and by the admin; a key works only
for its own route, and only its digest is stored."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from gateway_app.keys import digest_of, key_for
from gateway_app.models import GatewayKey

pytestmark = pytest.mark.django_db


def test_the_command_prints_a_key_once_and_stores_its_digest(route):
    out = io.StringIO()
    call_command("create_gateway_key", "--route", route.name, "--client", "ci-runner-7", stdout=out)
    key = out.getvalue().strip()
    row = GatewayKey.objects.get()
    assert row.digest == digest_of(key) and row.client_name == "ci-runner-7" and key_for(presented=key) == row


def test_the_command_refuses_an_unknown_route(db):
    with pytest.raises(CommandError, match="no gateway route"):
        call_command("create_gateway_key", "--route", "nope", "--client", "x")


def test_a_key_of_a_disabled_route_is_refused(route):
    out = io.StringIO()
    call_command("create_gateway_key", "--route", route.name, "--client", "x", stdout=out)
    route.enabled = False
    route.save()
    assert key_for(presented=out.getvalue().strip()) is None


def test_the_admin_shows_a_new_key_once(route, admin_client):
    response = admin_client.post("/admin/gateway_app/gatewaykey/add/",
                                 {"route": route.pk, "client_name": "bob-laptop"}, follow=True)
    assert response.status_code == 200
    row = GatewayKey.objects.get()
    shown = [str(m) for m in response.context["messages"]]
    (text,) = [m for m in shown if "shown only now" in m]
    key = text.rsplit(" ", 1)[-1]
    assert digest_of(key) == row.digest and key not in str(list(GatewayKey.objects.values()))
