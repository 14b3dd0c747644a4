"""Server-rendered pages for support staff: the audit log (filters, pages) and the rollback / redo forms the
compaction inspector posts to; and the audit entries written for policy and provider changes."""

import pytest

from compaction_app.models import AuditEntry, Compaction, CompactionPolicy, Provider
from sessions_app.models import RolloutLine
from sessions_app.rollout import selectors


@pytest.fixture
def support_client(client, support_user):
    client.force_login(support_user)
    return client


def test_the_audit_log_needs_the_support_role(client, make_user, db):
    assert client.get("/audit/")["Location"].startswith("/login/")
    client.force_login(make_user("operator"))
    assert client.get("/audit/").status_code == 403


def test_the_audit_log_lists_who_when_and_why_and_filters_by_action_and_session(
    support_client, make_session, add_turn, compact, support_user
):
    one, two = make_session(), make_session()
    add_turn(one, 1)
    compaction = compact(one)
    support_client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "summary lost the file list"})
    add_turn(two, 1)
    compact(two)

    page = support_client.get("/audit/").content.decode()
    assert "summary lost the file list" in page and support_user.username in page
    assert page.count('class="audit-row') == AuditEntry.objects.count() == 3
    # the compaction an entry names opens its inspector (issue 47)
    assert f'<a href="/compactions/{compaction.pk}/">#{compaction.pk}</a>' in page

    only_rollbacks = support_client.get("/audit/", {"action": "rollback"}).content.decode()
    assert only_rollbacks.count('class="audit-row') == 1
    only_two = support_client.get("/audit/", {"session": two.pk}).content.decode()
    assert only_two.count('class="audit-row') == 1 and f"#{two.pk}" in only_two


def test_the_audit_log_is_paginated(support_client, db):
    AuditEntry.objects.bulk_create(AuditEntry(action="import", reason=f"r{i}") for i in range(120))
    first = support_client.get("/audit/").content.decode()
    assert first.count('class="audit-row') == 50 and "page 1 of 3" in first
    last = support_client.get("/audit/", {"page": 3}).content.decode()
    assert last.count('class="audit-row') == 20


def test_the_rollback_form_shows_the_later_compactions_it_undoes_before_confirming(
    support_client, make_session, add_turn, compact
):
    session = make_session()
    add_turn(session, 1)
    first = compact(session)
    add_turn(session, 2)
    second = compact(session)

    page = support_client.get(f"/compactions/{first.pk}/rollback/").content.decode()

    assert 'id="rollback-undoes"' in page and f"#{second.pk}" in page
    assert Compaction.objects.filter(rolled_back=True).count() == 0  # a GET changes nothing


def test_posting_the_rollback_form_rolls_back_and_redirects_to_next(support_client, make_session, add_turn, compact):
    session = make_session()
    add_turn(session, 1)
    before = selectors.live_items(session=session)
    compaction = compact(session)

    response = support_client.post(f"/compactions/{compaction.pk}/rollback/",
                                   {"reason": "r", "next": f"/sessions/{session.pk}/"})

    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
    assert selectors.live_items(session=session) == before
    # a second post is refused with the message and changes nothing
    lines = RolloutLine.objects.count()
    again = support_client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "r"}, follow=True)
    assert f"compaction {compaction.pk} is already rolled back" in again.content.decode()
    assert RolloutLine.objects.count() == lines
    # and the redo form re-applies it
    support_client.post(f"/compactions/{compaction.pk}/redo/", {"reason": "ok"})
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is False


def test_operators_cannot_post_the_rollback_form(client, make_user, make_session, add_turn, compact):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    client.force_login(make_user("operator"))
    assert client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "r"}).status_code == 403
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is False


def test_policy_changes_in_the_admin_are_audited_with_old_and_new_values(client, admin_user, policy):
    client.force_login(admin_user)
    form = client.get(f"/admin/compaction_app/compactionpolicy/{policy.pk}/change/").context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None and k != "hooks"}
    data.update(name=policy.name, auto_compact_token_limit=12345)
    response = client.post(f"/admin/compaction_app/compactionpolicy/{policy.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""

    entry = AuditEntry.objects.get(action="policy_change")
    assert entry.actor == admin_user and entry.detail["via"] == "admin" and entry.detail["id"] == policy.pk
    assert entry.detail["changes"]["auto_compact_token_limit"] == {"new": 12345, "old": None}


def test_policy_and_provider_changes_through_the_api_are_audited(admin_api, admin_user_role, policy, provider):
    admin_api.patch(f"/api/v1/policies/{policy.pk}", {"auto_compact_token_limit": 20000}, format="json")
    admin_api.patch(f"/api/v1/providers/{provider.pk}", {"context_window": 64000}, format="json")
    admin_api.post("/api/v1/policies", {"name": "new-one"}, format="json")

    policy_entries = AuditEntry.objects.filter(action="policy_change").order_by("pk")
    assert [e.detail["created"] for e in policy_entries] == [False, True]
    assert policy_entries[0].detail["changes"]["auto_compact_token_limit"] == {"new": 20000, "old": None}
    assert policy_entries[1].detail["id"] == CompactionPolicy.objects.get(name="new-one").pk
    provider_entry = AuditEntry.objects.get(action="provider_change")
    assert provider_entry.actor == admin_user_role
    assert provider_entry.detail["changes"]["context_window"] == {"new": 64000, "old": 32000}
    assert Provider.objects.get(pk=provider.pk).context_window == 64000


def test_a_refused_rollback_says_why_inside_the_form_and_keeps_the_reason(support_client, make_session, add_turn,
                                                                          compact):
    from sessions_app.rollout.lease import acquire, release

    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    lines = RolloutLine.objects.count()
    lease = acquire(session_id=session.pk, purpose="turn")  # a turn holds the session: the rollback is refused
    try:
        page = support_client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "lost the plan"})
        fragment = support_client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "lost the plan"},
                                       HTTP_HX_REQUEST="true")
    finally:
        release(lease)

    body = page.content.decode()
    form = body[body.index('id="rollback-form"'):body.index("</form>", body.index('id="rollback-form"'))]
    assert page.status_code == 409 and "Not rolled back: session" in form and "a turn is running" in form
    assert ">lost the plan</textarea>" in form and 'class="flash' not in body
    html = fragment.content.decode()
    assert fragment.status_code == 409 and html.lstrip().startswith('<form id="rollback-form"')
    assert "a turn is running" in html and RolloutLine.objects.count() == lines
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is False


def test_a_rollback_with_htmx_goes_back_to_where_it_came_from(support_client, make_session, add_turn, compact):
    session = make_session()
    add_turn(session, 1)
    compaction = compact(session)
    response = support_client.post(f"/compactions/{compaction.pk}/rollback/",
                                   {"reason": "r", "next": f"/sessions/{session.pk}/"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"] == f"/sessions/{session.pk}/"
    assert Compaction.objects.get(pk=compaction.pk).rolled_back is True
