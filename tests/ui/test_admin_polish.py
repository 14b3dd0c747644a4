"""The admin configuration forms: the effective (clamped) auto-compact limit is shown, negative budgets refused."""

import pytest
from django.test import Client

from compaction_app.models import CompactionPolicy


@pytest.fixture
def admin_client_role(admin_user_role):
    admin_user_role.is_staff = True
    admin_user_role.save()
    client = Client()
    client.force_login(admin_user_role)
    return client


def _policy_form(policy: CompactionPolicy, **changes) -> dict:
    data = {
        "name": policy.name, "strategy": policy.strategy, "auto_compact_scope": policy.auto_compact_scope,
        "token_counter": policy.token_counter, "user_message_budget": policy.user_message_budget,
        "retained_message_budget": policy.retained_message_budget, "auto_compact_token_limit": "",
        "compact_prompt": "", "stream_max_retries": "", "request_max_retries": "", "fallback_model": "",
        "masking_keep_turns": policy.masking_keep_turns, "masking_keep_tokens": "", "retention_flag_below": "",
        "pin_mode": policy.pin_mode,
    }
    data.update(changes)
    return data


@pytest.mark.django_db
def test_a_limit_above_the_window_is_accepted_and_the_clamped_value_shown(admin_client_role, provider, policy):
    url = f"/admin/compaction_app/compactionpolicy/{policy.pk}/change/"
    response = admin_client_role.post(url, _policy_form(policy, auto_compact_token_limit="500000"))
    assert response.status_code == 302
    policy.refresh_from_db()
    assert policy.auto_compact_token_limit == 500000  # stored as given
    page = admin_client_role.get(url).content.decode()
    assert "<strong>28,800</strong> (clamped to 90% of the window)" in page  # 90% of the 32,000 window


@pytest.mark.django_db
def test_a_negative_budget_is_refused_and_nothing_changes(admin_client_role, policy):
    url = f"/admin/compaction_app/compactionpolicy/{policy.pk}/change/"
    response = admin_client_role.post(url, _policy_form(policy, user_message_budget="-5"))
    assert response.status_code == 200 and b"greater than or equal to 0" in response.content
    policy.refresh_from_db()
    assert policy.user_message_budget == 20000


@pytest.mark.django_db
def test_the_configuration_lists_render_for_an_admin(admin_client_role, provider, policy):
    for model in ("provider", "compactionpolicy", "prompt", "hook", "compaction", "compactionattempt"):
        assert admin_client_role.get(f"/admin/compaction_app/{model}/").status_code == 200, model
    page = admin_client_role.get(f"/admin/compaction_app/provider/{provider.pk}/change/").content.decode()
    assert "30,400" in page  # the usable window: 95% of 32,000


@pytest.mark.django_db
def test_an_operator_cannot_open_the_admin(operator_user):
    client = Client()
    client.force_login(operator_user)
    assert client.get("/admin/compaction_app/compactionpolicy/").status_code == 302
