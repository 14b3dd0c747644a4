"""create_user prints a working API token; setup_demo prepares the embedded default idempotently."""

import re
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from compaction_app.models import CompactionPolicy, Provider


def _run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_user_puts_the_user_in_the_role_and_prints_a_working_token(db):
    output = _run("create_user", "--username", "ops", "--role", "operator")
    token = re.search(r"token: (\w+)", output).group(1)
    user = User.objects.get(username="ops")
    assert list(user.groups.values_list("name", flat=True)) == ["operator"]
    assert not user.has_usable_password()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/sessions").status_code == 200
    assert client.post("/api/v1/providers", {}, format="json").status_code == 403


def test_create_user_with_admin_role_can_use_the_django_admin(client, db):
    _run("create_user", "--username", "boss", "--role", "admin", "--password", "a-long-test-password")
    assert client.login(username="boss", password="a-long-test-password")
    assert client.get("/admin/compaction_app/compactionpolicy/").status_code == 200


def test_create_user_refuses_an_existing_name_and_an_unknown_role(db):
    _run("create_user", "--username", "ops", "--role", "operator")
    with pytest.raises(CommandError, match="already exists"):
        _run("create_user", "--username", "ops", "--role", "support")
    with pytest.raises(CommandError):
        _run("create_user", "--username", "x", "--role", "king")


def test_setup_demo_is_idempotent_and_prints_a_working_login(client, db):
    first = _run("setup_demo")
    second = _run("setup_demo")
    assert Provider.objects.filter(name="embedded", base_url="embedded", model="sim-1").count() == 1
    assert CompactionPolicy.objects.filter(name="default").count() == 1
    assert "http://127.0.0.1:8000/" in second
    old = re.search(r"login: admin / (\S+)", first).group(1)
    new = re.search(r"login: admin / (\S+)", second).group(1)
    assert old != new
    assert not client.login(username="admin", password=old)
    assert client.login(username="admin", password=new)
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("password", ["short", "password123", "qwertyuiop", "boss-admin"])
def test_create_user_refuses_a_password_the_validators_refuse_and_creates_nothing(db, password):
    with pytest.raises(CommandError, match="password refused"):
        _run("create_user", "--username", "boss-admin", "--role", "admin", "--password", password)
    assert not User.objects.filter(username="boss-admin").exists()
