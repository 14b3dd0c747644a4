"""Issue 14: a hook's target is checked when it is written (the admin form runs the model's clean): webhooks need
an allowed outbound URL, callables an allowed module prefix, and the timeout is capped."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from compaction_app.models import Hook


def _hook(**fields) -> Hook:
    return Hook(**{"name": "h", "event": "pre_compact", "kind": "callable", "target": "compactweb_hooks.notify",
                   "timeout_seconds": 10.0, **fields})


@pytest.mark.parametrize("target", ["file:///etc/passwd", "gopher://127.0.0.1:6379/_x", "javascript:alert(1)",
                                    "https://user:pw@hooks.example.invalid/"])
def test_a_webhook_to_a_url_the_server_must_not_call_is_refused(db, target):
    with pytest.raises(ValidationError) as refused:
        _hook(kind="webhook", target=target).full_clean()
    assert "target" in refused.value.message_dict


def test_with_deny_private_a_webhook_to_the_metadata_address_is_refused(db, settings):
    settings.COMPACTWEB_OUTBOUND_DENY_PRIVATE = True
    with pytest.raises(ValidationError):
        _hook(kind="webhook", target="http://169.254.169.254/latest/meta-data/").full_clean()


@pytest.mark.parametrize("target", ["os.system", "subprocess:getoutput", "builtins.exec"])
def test_a_callable_outside_the_allowed_modules_is_refused(db, target):
    with pytest.raises(ValidationError) as refused:
        _hook(target=target).full_clean()
    assert "COMPACTWEB_HOOK_CALLABLE_PREFIXES" in refused.value.message_dict["target"][0]


def test_allowed_targets_and_timeouts_are_accepted_and_a_longer_timeout_is_not(db):
    _hook().full_clean()
    _hook(name="w", kind="webhook", target="https://hooks.example.invalid/pre").full_clean()
    with pytest.raises(ValidationError) as refused:
        _hook(name="slow", timeout_seconds=3600).full_clean()
    assert "timeout_seconds" in refused.value.message_dict


def test_the_admin_form_refuses_a_callable_outside_the_prefixes(client, admin_user_role):
    admin_user_role.is_staff = True
    admin_user_role.save()
    client.force_login(admin_user_role)
    data = {"name": "pwn", "event": "pre_compact", "kind": "callable", "target": "os.system", "matcher": "any",
            "timeout_seconds": "10", "enabled": "on"}
    response = client.post("/admin/compaction_app/hook/add/", data)
    assert response.status_code == 200 and "target" in response.context["adminform"].form.errors
    assert not Hook.objects.filter(name="pwn").exists()
