"""The fleet hub: one member of the fleet group per process and event loop, handing each event only to the boards
holding its row (and to a last page a new session joins); counts and alerts flag every board."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import InMemoryChannelLayer
from redis.exceptions import ConnectionError as RedisConnectionError

from sessions_app.live.fleet_hub import FleetHub, hub_for
from sessions_app.rollout.events import ALERT_KIND, FLEET_GROUP, MESSAGE_TYPE, lines_event, transient_event


class FakeBoard:
    def __init__(self, rows=(), *, newest_id: int | None = None, room: int = 50) -> None:
        self.page_rows = set(rows)
        self.newest_id, self.room = newest_id, room
        self.rows: list[int] = []
        self.counts = self.alerts = self.failures = 0

    def joins_the_page(self, session_id, summary) -> bool:
        return (self.newest_id is not None and session_id > self.newest_id and len(self.page_rows) < self.room
                and summary is not None)

    def row_event(self, session_id, event, summary) -> None:
        self.rows.append(session_id)

    def counts_changed(self) -> None:
        self.counts += 1

    def alerts_changed(self) -> None:
        self.alerts += 1

    def layer_failed(self) -> None:
        self.failures += 1


def event(session_id: int, *, state: str = "idle", seq: int = 5) -> dict:
    return lines_event(session_id=session_id, summary={"id": session_id, "state": state, "last_seq": seq},
                       lines=[(seq, "response_item", None)])


def hub_with(*boards: FakeBoard) -> FleetHub:
    hub = FleetHub(InMemoryChannelLayer())
    for board in boards:
        hub.register(board, open_ended=board.newest_id is not None)
    return hub


async def until(condition, *, tries: int = 100) -> None:
    """Let the hub's reader run until `condition()` holds (or the tries run out: the asserts after it then say what is missing)."""
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(0.01)


def test_an_event_reaches_only_the_boards_holding_its_row():
    first, second, elsewhere = FakeBoard({1, 2}), FakeBoard({2, 3}), FakeBoard({40})
    hub = hub_with(first, second, elsewhere)

    for session_id in (1, 2, 3, 99):
        hub.dispatch(event(session_id))

    assert first.rows == [1, 2] and second.rows == [2, 3] and elsewhere.rows == []


def test_a_new_session_joins_a_last_page_with_room_and_its_later_events_follow_it():
    last, full = FakeBoard({7}, newest_id=7, room=2), FakeBoard({1, 2, 3})
    hub = hub_with(last, full)

    hub.dispatch(event(8))  # newer than the page's connect: it ranks at the end of the fleet
    hub.dispatch(event(8, seq=6))
    hub.dispatch(event(9))  # the page is full now

    assert last.rows == [8, 8] and last.page_rows == {7, 8}
    assert full.rows == [] and hub.by_row[8] == {last} and 9 not in hub.by_row


def test_an_older_session_does_not_join_a_last_page():
    last = FakeBoard({7}, newest_id=7)
    hub = hub_with(last)

    hub.dispatch(event(5))  # existed when the page ranked: it is on another page

    assert last.rows == [] and last.page_rows == {7}


def test_a_row_the_board_dropped_no_longer_reaches_it():
    board, other = FakeBoard({1, 2}), FakeBoard({1})
    hub = hub_with(board, other)

    hub.remove_rows(board, {1})
    hub.dispatch(event(1))

    assert board.rows == [] and other.rows == [1] and board.page_rows == {2}


def test_an_unregistered_board_gets_nothing_and_leaves_no_index():
    board = FakeBoard({1})
    hub = hub_with(board)

    hub.unregister(board)
    hub.dispatch(event(1, state="running"))

    assert board.rows == [] and board.counts == 0 and hub.by_row == {}


def test_a_change_of_state_anywhere_flags_every_boards_counts_once():
    on_page, off_page = FakeBoard({1}), FakeBoard({2})
    hub = hub_with(on_page, off_page)

    hub.dispatch(event(3, state="running"))  # first seen: the counts may have moved
    hub.dispatch(event(3, state="running", seq=6))  # the same state
    hub.dispatch(event(3, state="idle", seq=7))
    hub.dispatch(transient_event(session_id=3, after_seq=7, kind="compaction.started", detail={}))  # not told

    assert on_page.counts == off_page.counts == 3
    assert on_page.rows == off_page.rows == []


def test_alerts_flag_every_board_and_the_turn_loops_progress_reaches_none():
    boards = [FakeBoard({1}), FakeBoard()]
    hub = hub_with(*boards)

    hub.dispatch({"type": MESSAGE_TYPE, "session_id": None, "seq": None, "after_seq": 0, "kind": ALERT_KIND,
                  "summary": None, "detail": {"alert_id": 4}})
    hub.dispatch(transient_event(session_id=1, after_seq=0, kind="turn_step", detail={}))

    assert [b.alerts for b in boards] == [1, 1]
    assert [(b.rows, b.counts) for b in boards] == [([], 0), ([], 0)]


@pytest.mark.asyncio
async def test_the_hub_joins_the_fleet_group_once_for_its_holders_and_leaves_with_the_last():
    layer = InMemoryChannelLayer()
    hub = hub_for(layer)

    await hub.hold()
    await hub.hold()
    assert hub_for(layer) is hub and len(layer.groups[FLEET_GROUP]) == 1
    await hub.release()
    assert len(layer.groups[FLEET_GROUP]) == 1
    await hub.release()

    assert not layer.groups.get(FLEET_GROUP) and hub.channel is None


@pytest.mark.asyncio
async def test_the_hub_hands_on_what_the_fleet_group_receives():
    layer = InMemoryChannelLayer()
    hub, board = hub_for(layer), FakeBoard({1})
    await hub.hold()
    hub.register(board, open_ended=False)

    await layer.group_send(FLEET_GROUP, event(1))
    await until(lambda: board.rows)

    assert board.rows == [1]
    await hub.release()


@pytest.mark.asyncio
async def test_the_hub_stays_in_the_fleet_group_past_the_group_expiry():
    layer = InMemoryChannelLayer(group_expiry=1)
    hub = hub_for(layer)
    await hub.hold()

    await asyncio.sleep(2.5)  # more than twice the expiry: only the hub's refresh keeps it a member
    await layer.group_send(FLEET_GROUP, event(1))  # the send sweeps expired members first

    assert list(layer.groups.get(FLEET_GROUP, {})) == [hub.channel]
    await hub.release()


@pytest.mark.asyncio
async def test_a_hold_while_the_layer_is_down_raises_and_holds_nothing(monkeypatch):
    layer = InMemoryChannelLayer()
    hub = hub_for(layer)

    async def refuse(*args, **kwargs):
        raise RedisConnectionError("Connection refused.")

    monkeypatch.setattr(layer, "group_add", refuse)
    with pytest.raises(RedisConnectionError):
        await hub.hold()

    assert hub.holders == 0 and hub.channel is None
    monkeypatch.undo()
    await hub.hold()  # the layer is back: the next board joins
    assert len(layer.groups[FLEET_GROUP]) == 1
    await hub.release()


@pytest.mark.asyncio
async def test_a_failing_receive_tells_every_board_and_the_hub_still_ends(monkeypatch):
    layer = InMemoryChannelLayer()
    hub, boards = hub_for(layer), [FakeBoard({1}), FakeBoard({2})]

    async def refuse(channel):
        raise RedisConnectionError("Connection closed by server.")

    monkeypatch.setattr(layer, "receive", refuse)
    await hub.hold()
    for board in boards:
        hub.register(board, open_ended=False)
    await until(lambda: all(b.failures for b in boards))

    assert [b.failures for b in boards] == [1, 1]
    await asyncio.wait_for(hub.release(), 5)
    assert hub.channel is None


@pytest.mark.asyncio
async def test_after_a_failed_receive_the_hub_joins_the_fleet_group_again(monkeypatch):
    # A restarted Redis has forgotten every group; boards reconnecting meanwhile find the hub held and join nothing.
    from sessions_app.live import fleet_hub

    monkeypatch.setattr(fleet_hub, "RETRY_SECONDS", 0.01)
    layer = InMemoryChannelLayer()
    hub, board = hub_for(layer), FakeBoard({1})
    receive, failed = layer.receive, []

    async def fail_once_then_receive(channel):
        if not failed:
            failed.append(channel)
            layer.groups.clear()  # the restart
            raise RedisConnectionError("Connection closed by server.")
        return await receive(channel)

    monkeypatch.setattr(layer, "receive", fail_once_then_receive)
    await hub.hold()
    hub.register(board, open_ended=False)
    await until(lambda: failed and layer.groups.get(FLEET_GROUP))

    assert list(layer.groups.get(FLEET_GROUP, {})) == [hub.channel]
    await layer.group_send(FLEET_GROUP, event(1))
    await until(lambda: board.rows)
    assert board.rows == [1]
    await hub.release()
