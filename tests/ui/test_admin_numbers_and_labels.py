"""The admin and the analytics page write numbers and codes as the other pages do (issue 47 item 7): counts with
thousands separators in the admin's lists and read-only fields, the method as words in analytics' retention table,
an attempt's error kind as words with the attempts that did not fail named in the filter. And the admin forms
axe-core found wanting (issue 47): a route being added shows no (empty, sideways-scrolling) key table, a user's
last login and joining date are text, not unlabelled date and time inputs."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from compaction_app.models import Compaction, CompactionAttempt
from gateway_app.models import GatewayRoute
from sessions_app.models import Session
from tests.ui.test_labels_and_dates import _compacted, login

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_page(admin_user_role):
    admin_user_role.is_staff = True
    admin_user_role.save()
    return login(admin_user_role)


def test_the_compaction_list_and_its_view_write_token_counts_with_separators(
        admin_page, operator_api, make_session, items_factory, no_engine_sleeps):
    made = _compacted(operator_api, make_session, items_factory)
    Compaction.objects.filter(pk=made["id"]).update(tokens_before=36_291, tokens_after=1_417)
    listed = admin_page.get("/admin/compaction_app/compaction/").content.decode()
    assert re.search(r'<td class="field-tokens_before[^"]*">36,291</td>', listed)
    assert re.search(r'<td class="field-tokens_after[^"]*">1,417</td>', listed)
    assert "36291" not in listed
    assert "?o=" in listed  # still sortable by the column
    viewed = admin_page.get(f"/admin/compaction_app/compaction/{made['id']}/change/").content.decode()
    assert "36,291" in viewed and "36291" not in viewed


def test_a_sessions_read_only_meter_is_separated_and_its_title_still_an_input(admin_client, make_session):
    """A superuser may change a session (its title): the form beside its read-only figures still works."""
    session = make_session(title="meters")
    Session.objects.filter(pk=session.pk).update(meter_prefill=12_345)
    page = admin_client.get(f"/admin/sessions_app/session/{session.pk}/change/").content.decode()
    assert "12,345" in page and "12345" not in page
    assert 'name="title"' in page  # an editable field stays an input
    saved = admin_client.post(f"/admin/sessions_app/session/{session.pk}/change/", {
        "title": "meters, renamed", "state": session.state, "provider": session.provider_id,
        "policy": session.policy_id, "fault_injection": "{}"})
    assert saved.status_code == 302, saved.content.decode()[-2000:]
    session.refresh_from_db()
    assert (session.title, session.meter_prefill) == ("meters, renamed", 12_345)


def test_analytics_names_the_method_in_words_in_its_retention_table(
        admin_page, operator_api, make_session, items_factory, no_engine_sleeps):
    _compacted(operator_api, make_session, items_factory)
    page = admin_page.get("/analytics/").content.decode()
    table = page[page.index('data-by="method"'):]
    table = table[:table.index("</table>")]
    assert "<td>local summarisation</td>" in table and "<td>local</td>" not in table


def test_the_attempt_lists_error_kind_filter_names_each_choice(admin_page, make_session):
    session = make_session(title="attempts")
    for kind in ("", "context_window_exceeded"):
        CompactionAttempt.objects.create(session=session, trigger="auto", reason="context_limit", phase="pre_turn",
                                         implementation="responses", strategy="local", status="failed",
                                         error_kind=kind, started_at=timezone.now())
    page = admin_page.get("/admin/compaction_app/compactionattempt/").content.decode()
    assert re.search(r'<a href="\?error_kind=">\s*none \(did not fail\)', page)
    assert re.search(r'<a href="\?error_kind=context_window_exceeded">\s*context window exceeded', page)
    assert not re.search(r'<a href="\?error_kind=[^"]*">\s*</a>', page)  # no link without a name


def test_a_route_being_added_has_no_key_table_and_a_route_has_one(admin_page, provider, policy):
    route = GatewayRoute.objects.create(name="team", provider=provider, policy=policy)
    assert 'id="keys-group"' not in admin_page.get("/admin/gateway_app/gatewayroute/add/").content.decode()
    assert 'id="keys-group"' in admin_page.get(f"/admin/gateway_app/gatewayroute/{route.pk}/change/").content.decode()


def test_a_users_last_login_and_joining_date_are_text_not_inputs(admin_page, operator_user):
    page = admin_page.get(f"/admin/auth/user/{operator_user.pk}/change/").content.decode()
    assert 'name="last_login_0"' not in page and 'name="date_joined_0"' not in page
    assert "Last login" in page and "Date joined" in page
