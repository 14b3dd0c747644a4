"""Numbers and codes (issue 47, item 7): labels, not codes, from one label vocabulary (remote_v2, token_budget,
job.running and the like read as words); one date format on every page; the inspector cites no spec section a
user cannot open."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from compaction_app import records
from compaction_app.engine.vocabulary import LABELS, PAGE_LABELS, Strategy
from compactweb.api_tokens import issue_token
from sessions_app.live.render import session_transient

pytestmark = pytest.mark.django_db

ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
TIME = re.compile(r'<time datetime="([^"]+)">([^<]*)</time>')


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _compacted(operator_api, make_session, items_factory) -> dict:
    session = make_session(items=[items_factory.user("fix the parser"), items_factory.assistant("log " * 400)])
    made = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    assert made.status_code == 201, made.content
    return made.json()


def test_the_method_codes_read_from_the_one_vocabulary_on_the_pages_that_show_them(
        operator_user, operator_api, make_session, items_factory, no_engine_sleeps):
    assert PAGE_LABELS["remote_v2"] == LABELS[Strategy]["remote_v2"] == "remote compaction v2"
    assert PAGE_LABELS["token_budget"] == LABELS[Strategy]["token_budget"]
    made = _compacted(operator_api, make_session, items_factory)
    page = login(operator_user).get(f"/compactions/{made['id']}/").content.decode()
    header = page[page.index('class="inspector-head__title"'):page.index("</dl>")]
    assert "standalone turn" in header and "user requested" in header and "local summarisation" in header
    assert "not injected (a new window starts without it)" in header  # injection, not do_not_inject
    for code in ("standalone_turn", "user_requested", "do_not_inject"):
        assert f">{code}<" not in page


def test_the_compaction_progress_names_a_job_in_words(operator_user, make_session):
    session = make_session()
    records.start_attempt(session=session, item_id="i", turn_id="t", trigger="manual", reason="user_requested",
                          implementation="responses", phase="standalone_turn", strategy="local", tokens_before=100)
    html = session_transient(session_id=session.pk, event={"kind": "job.running", "after_seq": 0, "detail": {}})
    status = html[html.index('id="compaction-status"'):]
    assert "100 tokens before · started" in status and "job.running" not in status.replace(
        'data-progress="job.running"', "")
    html = session_transient(session_id=session.pk,
                             event={"kind": "compaction.stream_error", "after_seq": 0, "detail": {}})
    assert "tokens before · reconnecting" in html


def test_every_page_writes_its_dates_in_one_format(operator_user, support_user, operator_api, make_session,
                                                    items_factory, no_engine_sleeps):
    made = _compacted(operator_api, make_session, items_factory)
    issue_token(user=operator_user)
    support = login(support_user)
    operator = login(operator_user)
    support.post("/alerts/silence/", {"kind": "loop", "minutes": 60})
    pages = {
        "audit log": support.get("/audit/").content.decode(),
        "rollback confirmation": support.get(f"/compactions/{made['id']}/rollback/").content.decode(),
        "api tokens": operator.get("/api-tokens/").content.decode(),
        "alerts": support.get("/alerts/").content.decode(),
        "session": operator.get(f"/sessions/{made['session']}/").content.decode(),
    }
    for name, page in pages.items():
        dates = TIME.findall(page)
        assert dates, name
        for iso, text in dates:
            assert ONE_FORMAT.fullmatch(text), (name, text)
            assert iso.startswith(text[:10]), (name, iso, text)


def test_the_inspector_cites_no_spec_section(operator_user, operator_api, make_session, items_factory,
                                             no_engine_sleeps):
    made = _compacted(operator_api, make_session, items_factory)
    page = login(operator_user).get(f"/compactions/{made['id']}/").content.decode()
    assert "§" not in page and not re.search(r"\bspec \d", page)


def test_the_admin_writes_dates_in_the_same_format(admin_user, operator_api, make_session, items_factory,
                                                   no_engine_sleeps):
    _compacted(operator_api, make_session, items_factory)
    page = login(admin_user).get("/admin/compaction_app/compaction/").content.decode()
    cell = re.search(r'<td class="field-created_at[^"]*">([^<]*)</td>', page)
    assert cell and ONE_FORMAT.fullmatch(cell.group(1)), cell
