"""Retention on the pages: the inspector's per-category scores and forgotten facts, the fleet board's badge for the
last compaction, the analytics rollup by strategy / policy / model / day."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from compaction_app.engine.items import user_message

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture(autouse=True)
def _no_engine_sleeps(no_engine_sleeps):
    """Retried failures wait no real time (tests/conftest.py)."""


@pytest.fixture
def scored(make_session):
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[
        user_message(f"Fix tests/billing/test_split.py {SCRIPT}"),
        {"type": "function_call", "call_id": "c1", "name": "shell",
         "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]})},
        {"type": "function_call_output", "call_id": "c1", "output": "Exit code: 1\nOutput:\nFAILED x"},
        user_message("then run ruff"),
    ])
    return session, do_compact_session(session_id=session.pk, strategy="local")


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_inspector_shows_the_score_per_category_and_the_forgotten_facts(operator_user, scored):
    _, compaction = scored
    body = login(operator_user).get(f"/compactions/{compaction.pk}/").content.decode()
    card = body[body.index('id="retention"'):body.index('id="compaction-cost"')]
    for label in ("Recall", "Artifact trail", "Continuation", "Decision"):
        assert label in card
    assert f'{round(compaction.retention_score * 100)}%' in card
    assert "forgot: exit 1 of pytest -q" in card
    assert "Window tokens freed" in body and "Re-read tax" in body


@pytest.mark.django_db
def test_fact_text_is_escaped_in_the_inspector(operator_user, make_session):
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[user_message(f"goal {SCRIPT}"), user_message("next")])
    compaction = do_compact_session(session_id=session.pk, strategy="token_budget")
    body = login(operator_user).get(f"/compactions/{compaction.pk}/").content.decode()
    assert SCRIPT not in body and "forgot: goal &lt;script&gt;" in body


@pytest.mark.django_db
def test_the_fleet_board_shows_the_last_compactions_score(operator_user, scored):
    _, compaction = scored
    body = login(operator_user).get("/").content.decode()
    assert f"kept {round(compaction.retention_score * 100)}%" in body


@pytest.mark.django_db
def test_analytics_rolls_retention_and_cost_up_by_method_policy_model_and_day(operator_user, scored):
    _, compaction = scored
    body = login(operator_user).get("/analytics/").content.decode()
    rollup = body[body.index('id="retention-rollup"'):]
    for by in ("method", "policy", "model", "day"):
        assert f'data-by="{by}"' in rollup
    strategy_table = rollup[rollup.index('data-by="method"'):rollup.index('data-by="policy"')]
    assert "<td>local summarisation</td>" in strategy_table and f"{round(compaction.retention_score * 100)}%" in strategy_table


@pytest.mark.django_db
def test_pins_are_added_and_removed_from_the_session_page(make_user, make_session):
    from sessions_app.compactions.retention import session_pins

    session = make_session(items=[user_message("hi")])
    client = login(make_user("support"))
    response = client.post(f"/sessions/{session.pk}/pins/", {"kind": "constraint", "text": f"never {SCRIPT}"},
                           follow=True)
    body = response.content.decode()
    (pin,) = session_pins(session_id=session.pk)
    assert "Pinned:" in body and "never &lt;script&gt;" in body and SCRIPT not in body
    body = client.post(f"/sessions/{session.pk}/pins/", {"kind": "wish", "text": "x"}, follow=True).content.decode()
    assert "Not pinned: kind" in body and len(session_pins(session_id=session.pk)) == 1
    client.post(f"/sessions/{session.pk}/pins/{pin.pin_id}/remove/", follow=True)
    assert session_pins(session_id=session.pk) == []


@pytest.mark.django_db
def test_pinning_needs_the_operator_role_and_csrf(make_user, make_session):
    session = make_session(items=[user_message("hi")])
    assert Client().post(f"/sessions/{session.pk}/pins/", {"text": "x"}).status_code == 302  # to the login page
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_user("support"))
    assert strict.post(f"/sessions/{session.pk}/pins/", {"text": "x"}).status_code == 403


@pytest.mark.django_db
def test_a_refused_pin_says_why_inside_the_pins_card(make_user, make_session):
    session = make_session(items=[user_message("hi")])
    client = Client()
    client.force_login(make_user("support"))
    fragment = client.post(f"/sessions/{session.pk}/pins/", {"kind": "wish", "text": "keep it"},
                           HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert fragment.status_code == 400 and html.lstrip().startswith('<section class="card" id="pins">')
    assert "Not pinned: kind" in html and 'value="keep it"' in html
    page = client.post(f"/sessions/{session.pk}/pins/", {"kind": "wish", "text": "keep it"}).content.decode()
    card = page[page.index('id="pins"'):page.index("</section>", page.index('id="pins"'))]
    assert "Not pinned: kind" in card and 'class="flash' not in page
    added = client.post(f"/sessions/{session.pk}/pins/", {"kind": "fact", "text": "ok"}, HTTP_HX_REQUEST="true")
    assert added.status_code == 200 and 'id="pin-list"' in added.content.decode() and "Pinned:" in added.content.decode()


@pytest.mark.django_db
def test_an_operator_cannot_pin_from_the_session_page(operator_user, make_session):
    from sessions_app.compactions.retention import session_pins

    session = make_session(items=[user_message("hi")])
    client = login(operator_user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="pin-form"' not in page and "Pinning needs the support role" in page

    fragment = client.post(f"/sessions/{session.pk}/pins/", {"kind": "fact", "text": "obey me"},
                           HTTP_HX_REQUEST="true")
    assert fragment.status_code == 403 and "support role" in fragment.content.decode()
    plain = client.post(f"/sessions/{session.pk}/pins/", {"kind": "fact", "text": "obey me"})
    assert plain.status_code == 403 and "Not pinned: pin:" in plain.content.decode()
    assert session_pins(session_id=session.pk) == []


@pytest.fixture
def remote(make_session):
    from sessions_app.compactions.services import do_compact_session

    session = make_session(items=[
        user_message("Fix tests/billing/test_split.py"),
        {"type": "function_call", "call_id": "c1", "name": "exec_command",
         "arguments": json.dumps({"cmd": "pytest -q tests/billing/test_split.py"})},
        {"type": "function_call_output", "call_id": "c1",
         "output": "Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\nFAILED x"},
        user_message("then run ruff"),
    ])
    return session, do_compact_session(session_id=session.pk, strategy="remote_v1")


@pytest.mark.django_db
def test_a_remote_compaction_shows_opaque_not_a_red_zero(operator_user, remote):
    _, compaction = remote
    assert compaction.retention["opaque"] is True and compaction.retention_score is None
    client = login(operator_user)
    board = client.get("/").content.decode()
    assert "opaque: not scored" in board and "kept 0%" not in board
    card = client.get(f"/compactions/{compaction.pk}/").content.decode()
    card = card[card.index('id="retention"'):card.index('id="compaction-cost"')]
    assert "opaque: not scored" in card and 'id="retention-visible"' in card and "forgot:" not in card
