"""The websocket consumers: who may connect, and what a watching page receives (rendered out-of-band HTML carrying
the per-session seq) when items are appended, a compaction installs a history, or progress is reported."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async

from sessions_app.live.consumers import FleetConsumer
from sessions_app.models import Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.services import NewLine, append_rollout_lines, do_append_items

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]

MARKER = re.compile(r'<div id="live-seq" hidden data-live-marker="(\w+)" data-seq="(\d+)"(?: data-from="(\d+)")?')


async def text_of(comm, timeout: float = 10) -> str:
    message = await comm.receive_output(timeout)
    assert message["type"] == "websocket.send", message
    return message["text"]


def marker(html: str) -> tuple[str, int, int | None]:
    found = MARKER.search(html)
    assert found, html[:300]
    kind, seq, start = found.groups()
    return kind, int(seq), int(start) if start else None


async def last_seq(session) -> int:
    return await database_sync_to_async(lambda: Session.objects.get(pk=session.pk).last_seq)()


async def append(session, *items, usage=None):
    return await database_sync_to_async(do_append_items)(session=session, items=list(items), usage=usage)


async def connected(comm) -> None:
    ok, _ = await comm.connect(timeout=10)
    assert ok


@pytest.mark.parametrize("path", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_an_anonymous_websocket_is_closed_with_4401(ws_for, session, path):
    comm = await ws_for(None, path.format(id=session.pk))
    await connected(comm)
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": 4401}


@pytest.mark.parametrize("path", ["/ws/fleet/", "/ws/sessions/{id}/"])
async def test_a_user_without_the_operator_role_is_closed_with_4403(ws_for, norole_user, session, path):
    comm = await ws_for(norole_user, path.format(id=session.pk))
    await connected(comm)
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": 4403}


async def test_an_unknown_session_is_closed_with_4404(ws_for, operator_user, session):
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk + 1000}/")
    await connected(comm)
    assert await comm.receive_output(10) == {"type": "websocket.close", "code": 4404}


async def test_a_connection_starts_with_the_sessions_newest_seq(ws_for, operator_user, session):
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    await connected(comm)
    kind, seq, _ = marker(await text_of(comm))
    assert (kind, seq) == ("hello", await last_seq(session))
    await comm.disconnect()


async def test_appended_items_arrive_as_oob_html_with_their_seqs(ws_for, support_user, session, items_factory):
    comm = await ws_for(support_user, f"/ws/sessions/{session.pk}/")  # support includes operator
    await connected(comm)
    _, before, _ = marker(await text_of(comm))
    result = await append(session, items_factory.user("add a retry to the client"), items_factory.assistant("done"))
    html = await text_of(comm)
    kind, seq, start = marker(html)
    assert (kind, start, seq) == ("batch", before + 1, result.lines[-1].seq)
    assert 'hx-swap-oob="beforeend:#history-items"' in html
    for line in result.lines[:2]:
        assert f'data-seq="{line.seq}"' in html
    assert "add a retry to the client" in html and "done" in html
    assert 'id="session-head"' in html and f'data-seq="{seq}"' in html
    await comm.disconnect()


async def test_transcript_text_is_escaped_in_live_updates(ws_for, operator_user, session, items_factory):
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    await connected(comm)
    await text_of(comm)
    await append(session, items_factory.user("<script>alert(1)</script>"))
    html = await text_of(comm)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    await comm.disconnect()


async def test_one_batch_covers_lines_appended_together(ws_for, operator_user, session, items_factory):
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    await connected(comm)
    await text_of(comm)
    result = await append(session, *[items_factory.user(f"step {i}") for i in range(3)])
    html = await text_of(comm)
    assert marker(html)[1:] == (result.lines[-1].seq, result.lines[0].seq)
    assert html.count('class="item item--user"') == 3
    assert await comm.receive_nothing(0.3)  # the other lines' events were covered by that batch
    await comm.disconnect()


async def test_a_compaction_line_replaces_the_history_and_redraws_chart_and_timeline(
    ws_for, operator_user, session, items_factory
):
    await append(session, items_factory.user("old request"), items_factory.assistant("old answer"),
                 usage={"input_tokens": 900, "output_tokens": 100})
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    await connected(comm)
    await text_of(comm)
    summary = items_factory.user("summary of the work so far")
    await database_sync_to_async(append_rollout_lines)(
        session=session, lines=[NewLine(p.COMPACTED, {"message": "", "replacement_history": [summary]})]
    )
    html = await text_of(comm)
    assert re.search(r'<section id="history" class="card history" data-seq="\d+" data-seq-follow hx-swap-oob="true"', html)
    assert "summary of the work so far" in html and "old request" not in html
    assert 'id="token-chart"' in html and 'class="chart__drop"' in html
    assert 'id="timeline"' in html and "Window #1" in html
    assert 'id="compaction-status"' in html
    await comm.disconnect()


async def test_transient_progress_updates_the_status_without_moving_the_seq(ws_for, operator_user, session):
    comm = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    await connected(comm)
    _, seq, _ = marker(await text_of(comm))
    await database_sync_to_async(publish_transient)(
        session_id=session.pk, after_seq=seq, kind="compaction.started", detail={"strategy": "local"}
    )
    html = await text_of(comm)
    assert f'<div id="live-transient" hidden data-live-marker="transient" data-seq="{seq}" data-after-seq="{seq}"' in html
    assert 'id="live-seq"' not in html
    assert 'id="compaction-status"' in html
    await comm.disconnect()


async def test_the_turn_loops_progress_is_not_rendered_on_either_page(ws_for, operator_user, session):
    """turn_started / turn_step / turn_finished change nothing either page shows: no message, no database read."""
    page = await ws_for(operator_user, f"/ws/sessions/{session.pk}/")
    await connected(page)
    _, seq, _ = marker(await text_of(page))
    fleet = await ws_for(operator_user, "/ws/fleet/")
    await connected(fleet)
    for kind in ("turn_started", "turn_step", "turn_finished"):
        await database_sync_to_async(publish_transient)(session_id=session.pk, after_seq=seq, kind=kind, detail={})
    await database_sync_to_async(publish_transient)(
        session_id=session.pk, after_seq=seq, kind="compaction.started", detail={"strategy": "local"}
    )
    html = await text_of(page)  # the first message is the compaction's, not a turn's
    assert 'id="compaction-status"' in html and 'data-live-marker="transient"' in html
    assert await page.receive_nothing(0.3)
    assert 'id="session-' in await text_of(fleet)  # the compaction's row update only
    assert await fleet.receive_nothing(0.3)
    await page.disconnect()
    await fleet.disconnect()


async def test_the_fleet_streams_each_sessions_row_with_its_newest_seq(ws_for, operator_user, session, items_factory):
    comm = await ws_for(operator_user, "/ws/fleet/")
    await connected(comm)
    result = await append(session, items_factory.user("hello fleet"))
    html = await text_of(comm)
    row = re.search(rf'<tr id="session-{session.pk}" class="row row--idle[^"]*" data-seq="(\d+)"[^>]* hx-swap-oob="true">',
                    html)
    assert row and int(row.group(1)) == result.lines[-1].seq
    assert 'role="meter"' in html and f'aria-valuenow="{result.session.tokens_in_window}"' in html
    await comm.disconnect()


async def test_the_fleet_renders_a_quiet_rows_event_at_once_and_coalesces_what_follows_into_one_row(
    ws_for, operator_user, session, items_factory, monkeypatch
):
    monkeypatch.setattr(FleetConsumer, "flush_seconds", 2.0)  # longer than five appends take on any backend
    comm = await ws_for(operator_user, "/ws/fleet/")
    await connected(comm)
    first = await append(session, items_factory.user("burst 0"))
    html = await text_of(comm, timeout=1.5)  # before flush_seconds: the board was quiet
    assert re.search(rf'<tr id="session-{session.pk}" class="row row--idle[^"]*" data-seq="{first.lines[-1].seq}"', html)
    for i in range(1, 5):
        await append(session, items_factory.user(f"burst {i}"))
    html = await text_of(comm)
    assert html.count(f'<tr id="session-{session.pk}"') == 1
    assert f'data-seq="{await last_seq(session)}"' in html
    assert await comm.receive_nothing(2.2)
    await comm.disconnect()


async def test_a_filtered_fleet_removes_a_row_that_does_not_match(ws_for, operator_user, session, items_factory):
    comm = await ws_for(operator_user, f"/ws/fleet/?state=running&rows={session.pk}")  # the page showed it running
    await connected(comm)
    await append(session, items_factory.user("an idle session changes"))
    html = await text_of(comm)
    assert html.startswith(f'<tr id="session-{session.pk}" hx-swap-oob="delete" data-live-delete="1"></tr>')
    assert 'id="fleet-counts"' in html and 'data-matching="0"' in html  # the header counts follow
    await comm.disconnect()


@pytest.mark.parametrize(
    "lines, stale",
    [
        ([(7, "response_item", None), (8, "event_msg", "token_count")], False),
        ([(7, "response_item", None), (8, "compacted", None)], True),
        ([(7, "event_msg", "compaction_interrupted")], True),
        ([(7, "rollback", None)], True),
    ],
)
async def test_the_fleet_rereads_the_last_compaction_when_any_line_of_an_event_is_a_compaction(lines, stale):
    from sessions_app.rollout.events import lines_event

    consumer = FleetConsumer()
    consumer.serving = True  # admitted: connected with the operator role
    consumer.summaries, consumer.pending, consumer.stale_attempts, consumer.flusher = {}, set(), set(), None
    consumer.page_rows = {3}  # the page shows session 3
    consumer._flush_soon = lambda: _noop()  # the flush is not under test here

    event = lines_event(session_id=3, summary={"last_seq": lines[-1][0]}, lines=lines)
    consumer.row_event(3, event, event["summary"])

    assert consumer.pending == {3}
    assert (3 in consumer.stale_attempts) is stale


async def _noop() -> None:
    return None
