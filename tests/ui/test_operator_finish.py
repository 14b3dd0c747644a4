"""The finish of the operator pages: styled error pages without a logged traceback for a refused role, plain method
labels, a compaction that did not reduce tokens flagged, labelled token totals, summary tokens in the attempts
table, the history card's count in live batches, the demo's example prompt and hook."""

from __future__ import annotations

import logging
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from compaction_app.models import Compaction, CompactionAttempt, Hook, Prompt
from sessions_app.live import render as live_render
from sessions_app.rollout.services import do_append_items


@pytest.fixture(autouse=True)
def _no_engine_sleeps(no_engine_sleeps):
    """Retried failures wait no real time (tests/conftest.py)."""


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def compacted(make_session, items_factory):
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[
        items_factory.user("find the flaky test " + "please " * 40),
        items_factory.assistant("found it " + "ok " * 600),
    ])
    return session, do_compact_session(session_id=session.pk, strategy="local")


@pytest.mark.django_db
def test_a_refused_role_gets_the_styled_403_with_the_reason_and_no_traceback_is_logged(make_user, caplog):
    caplog.set_level(logging.WARNING)
    response = login(make_user(None)).get("/analytics/")
    body = response.content.decode()
    assert response.status_code == 403
    assert 'class="card error-page"' in body and "needs the operator role" in body and 'class="topbar"' in body
    assert not [r for r in caplog.records if r.exc_info], "a refused role must not log a traceback"


@pytest.mark.django_db
def test_an_unknown_page_is_the_styled_404_with_the_navigation(operator_user, settings):
    settings.DEBUG = False
    body = login(operator_user).get("/no/such/page/").content.decode()
    assert 'class="card error-page"' in body and '<nav class="nav" aria-label="Pages">' in body and "Nothing here" in body


@pytest.mark.django_db
def test_the_500_page_is_styled_and_says_nothing_of_the_error(rf, operator_user):
    from compactweb.error_pages import server_error

    request = rf.get("/")
    request.user = operator_user
    response = server_error(request)
    body = response.content.decode()
    assert response.status_code == 500 and "Something went wrong" in body and "Traceback" not in body


@pytest.mark.django_db
def test_the_inspector_names_methods_plainly_and_labels_both_token_totals(operator_user, compacted):
    _, compaction = compacted
    body = login(operator_user).get(f"/compactions/{compaction.pk}/").content.decode()
    head = body[body.index('class="card inspector-head"'):body.index('id="before"')]
    assert "local summarisation" in head and ">responses<" not in head
    assert "Window tokens before" in head and 'id="token-totals-note"' in head
    assert "item estimates" in body[body.index('id="before"'):body.index('id="after"')]


@pytest.mark.django_db
def test_the_attempts_table_shows_the_summary_tokens_of_a_local_compaction(operator_user, compacted):
    _, compaction = compacted
    attempt = CompactionAttempt.objects.get(compaction=compaction)
    assert attempt.compaction_summary_tokens  # the summariser's output tokens, from the simulated model's usage
    body = login(operator_user).get(f"/compactions/{compaction.pk}/").content.decode()
    row = body[body.index('id="attempts"'):]
    assert f'<td class="num">{attempt.compaction_summary_tokens:,}</td>' in row


@pytest.mark.django_db
def test_a_compaction_that_did_not_reduce_tokens_is_flagged_on_the_inspector_and_the_session(operator_user,
                                                                                              compacted):
    session, compaction = compacted
    assert compaction.tokens_after < compaction.tokens_before
    client = login(operator_user)
    assert 'id="not-reducing"' not in client.get(f"/compactions/{compaction.pk}/").content.decode()
    Compaction.objects.filter(pk=compaction.pk).update(tokens_after=compaction.tokens_before + 5)
    CompactionAttempt.objects.filter(compaction=compaction).update(tokens_after=compaction.tokens_before + 5)
    assert 'id="not-reducing"' in client.get(f"/compactions/{compaction.pk}/").content.decode()
    assert 'data-flag="not-reducing"' in client.get(f"/sessions/{session.pk}/").content.decode()


@pytest.mark.django_db
def test_a_live_batch_of_appended_items_updates_the_history_cards_item_count(make_session, items_factory):
    session = make_session(items=[items_factory.user("one")])
    after = session.last_seq
    do_append_items(session=session, items=[items_factory.user("two"), items_factory.assistant("three")])
    html, _ = live_render.session_batch(session_id=session.pk, after_seq=after)
    assert 'id="history-count" class="muted" hx-swap-oob="true">window #0 · 3 items</span>' in html


@pytest.mark.django_db
def test_setup_demo_seeds_an_example_prompt_and_a_disabled_example_hook_once():
    for _ in range(2):
        call_command("setup_demo", "--no-fleet", stdout=StringIO())
    (prompt,) = Prompt.objects.all()
    (hook,) = Hook.objects.all()
    assert "file paths" in prompt.text and hook.enabled is False
    assert hook.target == "compaction_app.example_hooks.log_compaction"
    from compaction_app.engine.hooks import resolve_callable

    assert resolve_callable(hook.target)({"trigger": "manual"}) is None  # a hook that lets the compaction go on
