"""The fleet board's triage (issue 47, item 1): sessions that can still compact rank first and finished ones last,
marked; "finished" is a State filter of its own; an imported session's Compactions column and its last compaction
tell the same story."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.fleet.filter import FleetFilter
from sessions_app.models import Session
from tests.ui.test_live_pages import login

ROW = re.compile(r'<tr id="session-(\d+)"')
ROLLOUTS = Path(__file__).resolve().parents[1] / "fixtures" / "rollouts"


def _tokens(session: Session, tokens: int, **columns) -> None:
    Session.objects.filter(pk=session.pk).update(meter_usage_total=tokens, **columns)


def _row(body: str, session_id: int) -> str:
    start = body.index(f'<tr id="session-{session_id}"')
    return body[start:body.index("</tr>", start)]


@pytest.mark.django_db
def test_sessions_that_can_still_compact_rank_before_finished_ones_however_full(operator_user, make_session):
    over_but_done = make_session(title="done, far over its limit")  # an idle native session: nothing drives it
    _tokens(over_but_done, 51_000)
    stopped = make_session(title="stopped")
    _tokens(stopped, 40_000, state="stopped")
    running = make_session(title="running, half full")
    _tokens(running, 12_000, state="running")
    paused = make_session(title="paused, nearly empty")
    _tokens(paused, 1_000, state="paused")
    gateway = make_session(title="a Codex CLI between turns")
    _tokens(gateway, 5_000, source="gateway")

    body = login(operator_user).get("/").content.decode()
    assert [int(i) for i in ROW.findall(body)] == [running.pk, gateway.pk, paused.pk, over_but_done.pk, stopped.pk]
    for done in (over_but_done, stopped):
        assert "data-finished" in _row(body, done.pk) and ">finished</span>" in _row(body, done.pk)
    for live in (running, paused, gateway):
        assert "data-finished" not in _row(body, live.pk)


@pytest.mark.django_db
def test_the_state_filter_offers_finished_and_keeps_only_finished_sessions(operator_user, make_session):
    done = make_session(title="done")
    running = make_session(title="running")
    Session.objects.filter(pk=running.pk).update(state="running")
    failed = make_session(title="failed")
    Session.objects.filter(pk=failed.pk).update(state="failed")

    body = login(operator_user).get("/?state=finished").content.decode()
    assert '<option value="finished" selected>finished</option>' in body
    assert sorted(int(i) for i in ROW.findall(body)) == sorted([done.pk, failed.pk])
    # the live updates apply the same filter to each session summary
    finished = FleetFilter.from_query({"state": "finished"})
    assert finished.matches({"state": "idle", "source": "imported"})
    assert not finished.matches({"state": "idle", "source": "followed"})
    assert not finished.matches({"state": "running", "source": "native"})


@pytest.mark.django_db
def test_an_imported_sessions_last_compaction_is_the_one_its_compactions_count(support_api, operator_user, provider,
                                                                              policy):
    data = (ROLLOUTS / "codex_0169_local_compaction.jsonl").read_bytes()  # holds developer text: support imports it
    response = support_api.post("/api/v1/sessions/import",
                                 {"file": SimpleUploadedFile("local.jsonl", data)})
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["session"])
    assert session.compaction_count == 1

    row = _row(login(operator_user).get("/").content.decode(), session.pk)
    assert '<td class="num" data-label="Compactions">1</td>' in row
    assert "none yet" not in row
    compaction = session.compactions.get()
    assert f'href="/compactions/{compaction.pk}/"' in row
