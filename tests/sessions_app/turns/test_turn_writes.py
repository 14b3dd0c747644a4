"""How a turn writes: its context in one append, each model response (items, usage, what follows) in one more,
items of a stream that broke still recorded, and the turn's lease given back by its last write."""

from __future__ import annotations

import pytest

from compaction_app.engine.port import StreamEvent, Usage
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import events
from sessions_app.rollout import projection as p
from sessions_app.turns.loop import Marker, TurnConfig, UsageRecord, run_turn_loop
from tests.sessions_app.turns.fakes import FoldPort, Reply, ScriptedClient, assistant, call, overloaded
from tests.sessions_app.turns.test_turn_loop import BIG, EchoTool


class RecordingPort(FoldPort):
    """The fold port, remembering what each `record` call (one append in the real store) carried."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.writes: list[list[str]] = []

    async def record(self, records) -> None:
        self.writes.append([_kind(r) for r in records])
        await super().record(records)


def _kind(record) -> str:
    if isinstance(record, UsageRecord):
        return "usage"
    if isinstance(record, Marker):
        return record.payload.get("type") or record.kind
    return record.get("type")


class BrokenThenWhole:
    """A stream that completes one item and then breaks with a retryable error; the retry answers in full."""

    model = "fake"

    def __init__(self) -> None:
        self.attempts = 0

    async def stream_response(self, request):
        self.attempts += 1
        yield StreamEvent(type="response.created", response_id="r")
        if self.attempts == 1:
            yield StreamEvent(type="response.output_item.done", item=assistant("half", "msg_half"))
            raise overloaded()
        yield StreamEvent(type="response.output_item.done", item=assistant("whole", "msg_whole"))
        yield StreamEvent(type="response.completed", usage=Usage(input_tokens=90, output_tokens=10, total_tokens=100))


async def _no_sleep(delay: float) -> None:
    return None


@pytest.mark.asyncio
async def test_each_model_response_is_one_write_with_its_usage_and_what_follows_from_it():
    port = RecordingPort(current=BIG)
    port.new_turn()
    client = ScriptedClient([Reply([{"type": "reasoning", "summary": []}, call("shell", "c1")]),
                             Reply([assistant("done")])])

    result = await run_turn_loop(port=port, client=client, user_input="fix it", turn_id="t1",
                                 config=TurnConfig(tools={"shell": EchoTool()}, sleep=_no_sleep))

    assert result.ok
    assert port.writes[-2:] == [
        ["reasoning", "function_call", "usage", "function_call_output"],  # a response, its usage, the tool output
        ["message", "usage", "turn_complete"],  # the final answer closes the turn in the same write
    ]


@pytest.mark.asyncio
async def test_items_a_broken_stream_completed_are_recorded_before_the_retry_answers():
    port = RecordingPort(current=BIG)
    port.new_turn()

    result = await run_turn_loop(port=port, client=BrokenThenWhole(), user_input="go", turn_id="t1",
                                 config=TurnConfig(sleep=_no_sleep))

    assert result.ok
    assert port.writes[-2:] == [["message"], ["message", "usage", "turn_complete"]]
    texts = [i["content"][0]["text"] for i in port.items if i.get("role") == "assistant"]
    assert texts == ["half", "whole"]


@pytest.mark.django_db
def test_an_api_turn_is_two_appends_and_its_last_one_frees_the_lease(operator_api, make_session, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    session = make_session()
    appends: list[list[tuple]] = []
    publication = events.lines_publication

    def on_append(*, lines, **kwargs):  # each append's event, as it is built at commit
        appends.append(lines)
        return publication(lines=lines, **kwargs)

    monkeypatch.setattr(events, "lines_publication", on_append)
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "What does main.py do?"},
                                     format="json")

    assert response.status_code == 200, response.json()
    described = [[(kind, event) for _, kind, event in lines] for lines in appends]
    assert described == [
        [(p.EVENT_MSG, "turn_started"), (p.TURN_CONTEXT, None), (p.RESPONSE_ITEM, None)],
        [(p.RESPONSE_ITEM, None), (p.EVENT_MSG, "token_count"), (p.EVENT_MSG, "turn_complete")],
    ]
    assert Session.objects.filter(pk=session.pk, lease_holder="", lease_expires_at=None).exists()
    assert RolloutLine.objects.filter(session=session).count() == session.last_seq + 6


class _LeaseWatcher:
    """A model client that notes, while it answers, who holds the session's lease."""

    model = "fake"

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.lease_purposes: list[str] = []
        self.inputs: list[list[dict]] = []

    async def stream_response(self, request):
        from asgiref.sync import sync_to_async

        self.inputs.append(list(request.input))
        purpose = await sync_to_async(
            lambda: Session.objects.values_list("lease_purpose", flat=True).get(pk=self.session_id))()
        self.lease_purposes.append(purpose)
        yield StreamEvent(type="response.output_item.done", item=assistant("done"))
        yield StreamEvent(type="response.completed", usage=Usage(input_tokens=90, output_tokens=10, total_tokens=100))


@pytest.mark.django_db(transaction=True)
def test_an_own_lease_turn_takes_its_lease_with_its_first_lines_and_gives_it_back_with_its_last(make_session):
    from sessions_app.rollout import lease as locks
    from sessions_app.turns.services import run_turn

    session = make_session()
    client = _LeaseWatcher(session.pk)
    lease_writes: list[str] = []

    def note(execute, sql, params, many, context):
        if "lease_holder" in sql and sql.lstrip().upper().startswith("UPDATE"):
            lease_writes.append(sql)
        return execute(sql, params, many, context)

    from django.db import connection

    with connection.execute_wrapper(note):
        result = run_turn(session_id=session.pk, user_input="hi", client=client)

    assert result.ok and client.lease_purposes == ["turn"]  # held while the model answered
    assert len(lease_writes) == 2  # the first append took it, the last one gave it back: no transaction of its own
    assert Session.objects.filter(pk=session.pk, lease_holder="", lease_expires_at=None).exists()
    assert locks.acquire(session_id=session.pk, purpose="compaction")  # free for the next taker


@pytest.mark.django_db(transaction=True)
def test_a_session_written_between_a_turns_read_and_its_first_write_starts_the_turn_on_what_was_written(
        operator_api, make_session, items_factory, monkeypatch):
    from sessions_app.rollout.services import do_append_items
    from sessions_app.turns import services as turns

    session = make_session()
    load = turns._load_for_turn
    raced = []
    filler = "Ledger entries are posted per currency, reconciled nightly and audited weekly. " * 2100

    def load_then_someone_appends(**kwargs):
        loaded = load(**kwargs)
        if not raced:  # after the read, before the turn's first lines: the session goes over its limit
            raced.append(do_append_items(session=Session.objects.get(pk=session.pk),
                                         items=[items_factory.user("read this"), items_factory.assistant(filler)]))
        return loaded

    monkeypatch.setattr(turns, "_load_for_turn", load_then_someone_appends)

    data = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "next"}, format="json").json()

    # The pre-turn check saw the session as the other write left it (over the limit), not as it was read.
    assert raced and data["status"] == "completed", data
    assert data["compactions"] == [{"reason": "context_limit", "phase": "pre_turn", "ok": True, "error": ""}]
    kinds = [(kind, payload.get("type")) for kind, payload in
             RolloutLine.objects.filter(session=session).order_by("seq").values_list("kind", "payload")]
    assert kinds.count((p.EVENT_MSG, "turn_started")) == 1 and kinds.count((p.EVENT_MSG, "turn_complete")) == 1
    assert Session.objects.filter(pk=session.pk, lease_holder="").exists()


@pytest.mark.django_db(transaction=True)
def test_a_session_leased_between_a_turns_read_and_its_first_write_answers_409_and_records_nothing(
        operator_api, make_session, monkeypatch):
    from sessions_app.rollout import lease as locks
    from sessions_app.turns import services as turns

    session = make_session()
    load = turns._load_for_turn
    taken = []

    def load_then_someone_leases(**kwargs):
        loaded = load(**kwargs)
        taken.append(locks.acquire(session_id=session.pk, purpose="compaction"))
        return loaded

    monkeypatch.setattr(turns, "_load_for_turn", load_then_someone_leases)
    before = RolloutLine.objects.filter(session=session).count()

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hi"}, format="json")

    assert response.status_code == 409 and response.json()["error"]["code"] == "busy", response.json()
    assert RolloutLine.objects.filter(session=session).count() == before
    assert Session.objects.get(pk=session.pk).lease_holder == taken[0].holder  # the other holder's, untouched
    locks.release(taken[0])


class _AppendsWhileAnswering:
    """Answers with a tool call first, and while doing so someone else appends a user message to the session; then
    answers in full. Keeps each request's input."""

    model = "fake"

    def __init__(self, session_id: int, item: dict) -> None:
        self.session_id, self.item = session_id, item
        self.inputs: list[list[dict]] = []

    async def stream_response(self, request):
        from asgiref.sync import sync_to_async

        from sessions_app.rollout.services import do_append_items

        self.inputs.append(list(request.input))
        if len(self.inputs) == 1:
            await sync_to_async(lambda: do_append_items(session=Session.objects.get(pk=self.session_id),
                                                        items=[self.item]))()
            yield StreamEvent(type="response.output_item.done", item=call("shell", "c1"))
        else:
            yield StreamEvent(type="response.output_item.done", item=assistant("done"))
        yield StreamEvent(type="response.completed", usage=Usage(input_tokens=90, output_tokens=10, total_tokens=100))


@pytest.mark.django_db(transaction=True)
def test_a_message_appended_during_a_turn_is_in_the_turns_next_request(make_session, items_factory):
    from sessions_app.turns.services import run_turn

    session = make_session()
    run_turn(session_id=session.pk, user_input="warm up", client=_LeaseWatcher(session.pk))  # history now cached
    client = _AppendsWhileAnswering(session.pk, items_factory.user("also check the logs"))

    result = run_turn(session_id=session.pk, user_input="fix it", client=client)

    assert result.ok and result.sampling_requests == 2
    second = [i["content"][0]["text"] for i in client.inputs[1] if i.get("role") == "user"]
    assert "also check the logs" in second
