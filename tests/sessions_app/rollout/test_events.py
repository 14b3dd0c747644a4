"""Every committed rollout line is published to the session's group and the fleet group, numbered by its seq."""

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions_app.rollout import events
from sessions_app.rollout.events import FLEET_GROUP, publish_transient, session_group
from sessions_app.rollout.services import append_rollout_lines, do_append_items, estimate_line
from tests.channel_events import adrain, drain, subscribe


@pytest.mark.django_db(transaction=True)
def test_one_append_is_published_as_one_event_naming_its_lines_by_seq(session, items_factory):
    layer, channel = subscribe(session_group(session.pk))
    fleet_layer, fleet_channel = subscribe(FLEET_GROUP)
    result = do_append_items(session=session, items=[items_factory.user("hello"), items_factory.assistant("hi")])
    (event,) = drain(layer, channel)
    session.refresh_from_db()
    seqs = [line.seq for line in result.lines]
    assert (event["first_seq"], event["seq"]) == (seqs[0], seqs[-1])
    assert [line["seq"] for line in event["detail"]["lines"]] == seqs
    assert [line["line_kind"] for line in event["detail"]["lines"]][:2] == ["response_item", "response_item"]
    assert event["session_id"] == session.pk and event["kind"] == "rollout.lines"
    # the summary is the session as the append left it: the page renders up to its last_seq
    assert event["summary"]["last_seq"] == session.last_seq == seqs[-1]
    assert event["summary"]["tokens_in_window"] == session.tokens_in_window
    assert drain(fleet_layer, fleet_channel) == [event]


@pytest.mark.django_db(transaction=True)
def test_event_lines_name_the_event_type_of_event_lines(session):
    layer, channel = subscribe(session_group(session.pk))
    append_rollout_lines(session=session, lines=[estimate_line()])
    (event,) = drain(layer, channel)
    assert event["detail"]["lines"] == [{"seq": session.last_seq, "line_kind": "event_msg", "event_type": "token_count"}]


@pytest.mark.django_db(transaction=True)
def test_publishing_reads_nothing_back_from_the_database(session, items_factory, django_assert_num_queries):
    from sessions_app.rollout.selectors import session_summary

    summary = session_summary(session=session)
    subscribe(session_group(session.pk))  # a listener: the event is built and sent
    with django_assert_num_queries(0):
        events.publish_lines(session_id=session.pk, summary=summary, lines=[(9, "response_item", None)])


@pytest.mark.django_db(transaction=True)
def test_each_append_of_one_transaction_publishes_the_summary_as_that_append_left_it(session, items_factory):
    from django.db import transaction

    layer, channel = subscribe(session_group(session.pk))
    with transaction.atomic():  # both events go out at commit, after the second append changed the session
        first = do_append_items(session=session, items=[items_factory.user("one")]).lines[-1].seq
        second = do_append_items(session=session, items=[items_factory.user("two")]).lines[-1].seq
    events = drain(layer, channel)
    assert [e["summary"]["last_seq"] for e in events] == [first, second]
    assert all(type(e["summary"]) is dict for e in events)  # a plain dict, as every channel layer takes it


@pytest.mark.django_db(transaction=True)
def test_on_the_in_memory_layer_an_append_nobody_watches_builds_no_summary(
    session, items_factory, in_memory_layer, monkeypatch
):
    # Another layer may have listeners in other processes: there every append builds its summary.
    from sessions_app.rollout import selectors

    built = []
    real = selectors.session_summary
    monkeypatch.setattr(selectors, "session_summary", lambda **kw: built.append(1) or real(**kw))
    do_append_items(session=session, items=[items_factory.user("unwatched")])
    assert built == []
    layer, channel = subscribe(session_group(session.pk))
    do_append_items(session=session, items=[items_factory.user("watched")])
    assert len(drain(layer, channel)) == 1 and built == [1]


@pytest.mark.django_db(transaction=True)
def test_nothing_is_published_for_an_append_that_rolls_back(session, items_factory):
    from django.db import transaction

    layer, channel = subscribe(session_group(session.pk))
    with pytest.raises(RuntimeError), transaction.atomic():
        do_append_items(session=session, items=[items_factory.user("never committed")])
        raise RuntimeError("the surrounding transaction fails")
    assert drain(layer, channel) == []


@pytest.mark.django_db(transaction=True)
def test_transient_events_carry_no_seq_of_their_own(session):
    layer, channel = subscribe(session_group(session.pk))
    publish_transient(session_id=session.pk, after_seq=7, kind="compaction.progress", detail={"step": "started"})
    (event,) = drain(layer, channel)
    assert event["seq"] is None and event["after_seq"] == 7 and event["detail"] == {"step": "started"}


@pytest.mark.channel_layer
def test_sync_code_outside_any_event_loop_publishes_on_one_loop_per_thread():
    session_id = 7
    from sessions_app.rollout import events

    layer, channel = subscribe(session_group(session_id))
    loops = []
    for n in range(2):
        publish_transient(session_id=session_id, after_seq=n, kind="step_running", detail={})
        loops.append(events._thread_loops.loop)
    received = drain(layer, channel)
    assert [e["after_seq"] for e in received] == [0, 1]
    assert loops[0] is loops[1] and not loops[0].is_closed()  # no new event loop per publish


@pytest.mark.django_db(transaction=True)
def test_an_append_with_an_outbox_leaves_its_event_for_the_caller_to_send(session):
    layer, channel = subscribe(session_group(session.pk))
    outbox = []
    append_rollout_lines(session=session, lines=[estimate_line()], outbox=outbox)

    async def before_and_after_sending() -> tuple[list[dict], list[dict]]:
        before = await adrain(layer, channel)
        await events.apublish(outbox)
        return before, await adrain(layer, channel)

    before, after = async_to_sync(before_and_after_sending)()
    assert len(outbox) == 1 and before == []  # held back, not sent from inside the write
    (received,) = after
    assert received["kind"] == "rollout.lines" and received["seq"] == session.last_seq


@pytest.mark.django_db(transaction=True)
def test_an_append_that_rolls_back_publishes_nothing(session):
    from django.db import transaction

    layer, channel = subscribe(session_group(session.pk))
    with pytest.raises(RuntimeError), transaction.atomic():
        append_rollout_lines(session=session, lines=[estimate_line()])
        raise RuntimeError("the caller's transaction fails after the append")
    assert drain(layer, channel) == []


@pytest.fixture
def in_memory_layer(settings):
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    yield get_channel_layer()
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
def test_on_the_in_memory_layer_nothing_is_sent_while_no_page_of_the_process_listens(
    session, items_factory, in_memory_layer, monkeypatch
):
    # The in-memory layer is per process: a group nobody here joined has no listener anywhere, and a send to it
    # would still cost the layer a sweep of every channel and an event loop per append.
    sent = []
    real_send = in_memory_layer.group_send
    monkeypatch.setattr(in_memory_layer, "group_send", lambda group, message: sent.append(group) or real_send(
        group, message))
    do_append_items(session=session, items=[items_factory.user("nobody watches")])
    publish_transient(session_id=session.pk, after_seq=session.last_seq, kind="turn_step", detail={})
    assert sent == []
    layer, channel = subscribe(FLEET_GROUP)
    do_append_items(session=session, items=[items_factory.user("the fleet page watches")])
    assert sent == [FLEET_GROUP]  # the session's own group still has nobody
    (event,) = drain(layer, channel)
    assert event["seq"] == session.last_seq


def test_a_thread_closes_the_loop_it_published_on_before_it_ends():
    loops = []

    def publish_then_end():
        events._thread_loops.run(asyncio.sleep(0))  # what a publish from a plain thread runs on
        loops.append(events._thread_loops.loop)
        events.close_thread_loop()

    thread = threading.Thread(target=publish_then_end)
    thread.start()
    thread.join(10)

    [loop] = loops
    assert loop.is_closed()  # closed on its own thread, not later by the garbage collector on another one
