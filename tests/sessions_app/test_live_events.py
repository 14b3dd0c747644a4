"""Every committed rollout line is published to the session's group and the fleet group, numbered by its seq."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions_app.events import FLEET_GROUP, publish_transient, session_group
from sessions_app.services import do_append_items


def _subscribe(group: str) -> tuple:
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)
    return layer, channel


def _drain(layer, channel) -> list[dict]:
    async def receive_all() -> list[dict]:
        received = []
        while True:
            try:
                received.append(await asyncio.wait_for(layer.receive(channel), timeout=0.2))
            except TimeoutError:
                return received

    return async_to_sync(receive_all)()


@pytest.mark.django_db(transaction=True)
def test_appended_items_are_published_with_their_rollout_seq(session, items_factory):
    layer, channel = _subscribe(session_group(session.pk))
    fleet_layer, fleet_channel = _subscribe(FLEET_GROUP)
    result = do_append_items(session=session, items=[items_factory.user("hello"), items_factory.assistant("hi")])
    events = _drain(layer, channel)
    session.refresh_from_db()
    assert [e["seq"] for e in events] == [line.seq for line in result.lines]
    assert [e["kind"] for e in events][:2] == ["response_item", "response_item"]
    assert all(e["session_id"] == session.pk for e in events)
    assert events[-1]["summary"]["tokens_in_window"] == session.tokens_in_window
    assert [e["seq"] for e in _drain(fleet_layer, fleet_channel)] == [e["seq"] for e in events]


@pytest.mark.django_db(transaction=True)
def test_transient_events_carry_no_seq_of_their_own(session):
    layer, channel = _subscribe(session_group(session.pk))
    publish_transient(session_id=session.pk, after_seq=7, kind="compaction.progress", detail={"step": "started"})
    (event,) = _drain(layer, channel)
    assert event["seq"] is None and event["after_seq"] == 7 and event["detail"] == {"step": "started"}
