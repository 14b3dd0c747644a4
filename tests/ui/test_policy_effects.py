"""An admin sees a policy's effects (issue 47, item 6): the policy list's session count links to those sessions on
the fleet board, and saving a change to a policy that sessions can still use says how many and asks first."""

from __future__ import annotations

import pytest

from compaction_app.models import CompactionPolicy
from sessions_app.models import Session

URL = "/admin/compaction_app/compactionpolicy/{}/change/"


def _form_data(client, policy) -> dict:
    form = client.get(URL.format(policy.pk)).context["adminform"].form
    return {k: v for k, v in form.initial.items() if v is not None and k not in ("hooks", "apply_to_sessions")}


@pytest.mark.django_db
def test_the_policy_list_links_its_session_count_to_those_sessions_on_the_board(client, admin_user, policy,
                                                                                make_session):
    for n in range(3):
        make_session(title=f"uses it {n}")
    client.force_login(admin_user)
    page = client.get("/admin/compaction_app/compactionpolicy/").content.decode()
    assert f'<a href="/?policy={policy.pk}" title="the sessions using it, on the fleet board">3</a>' in page
    board = client.get(f"/?policy={policy.pk}").content.decode()
    assert board.count('<tr id="session-') == 3


@pytest.mark.django_db
def test_saving_a_policy_sessions_still_use_says_how_many_and_asks(client, admin_user, policy, make_session):
    sessions = [make_session(title=f"s{n}") for n in range(4)]
    Session.objects.filter(pk=sessions[0].pk).update(state="running")
    Session.objects.filter(pk=sessions[1].pk).update(state="stopped")  # a stopped one is not reached
    client.force_login(admin_user)
    page = client.get(URL.format(policy.pk)).content.decode()
    assert "4 sessions use this policy, 3 of them can still run." in page
    assert f'href="/?policy={policy.pk}"' in page

    data = _form_data(client, policy) | {"name": policy.name, "auto_compact_token_limit": 12345}
    asked = client.post(URL.format(policy.pk), data)
    assert asked.status_code == 200
    assert "This change reaches 3 sessions using this policy (1 running now)" in asked.content.decode()
    assert CompactionPolicy.objects.get(pk=policy.pk).auto_compact_token_limit is None  # nothing saved

    saved = client.post(URL.format(policy.pk), data | {"apply_to_sessions": "on"})
    assert saved.status_code == 302
    assert CompactionPolicy.objects.get(pk=policy.pk).auto_compact_token_limit == 12345


@pytest.mark.django_db
def test_a_policy_no_session_can_use_saves_without_asking(client, admin_user, policy):
    client.force_login(admin_user)
    data = _form_data(client, policy) | {"name": policy.name, "auto_compact_token_limit": 12345}
    assert client.post(URL.format(policy.pk), data).status_code == 302
