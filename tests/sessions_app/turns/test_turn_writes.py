"""How a turn writes: its context in one append, each model response (items, usage, what follows) in one more,
items of a stream that broke still recorded, and the turn's lease given back by its last write."""

from __future__ import annotations

import pytest

from compaction_app.engine.port import StreamEvent, Usage
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.signals import rollout_appended
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
def test_an_api_turn_is_two_appends_and_its_last_one_frees_the_lease(operator_api, make_session,
                                                                      django_capture_on_commit_callbacks):
    session = make_session()
    appends: list[list[tuple]] = []

    def on_append(sender, *, lines, **kwargs):
        appends.append(lines)

    rollout_appended.connect(on_append, dispatch_uid="test_turn_writes")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "What does main.py do?"},
                                         format="json")
    finally:
        rollout_appended.disconnect(dispatch_uid="test_turn_writes")

    assert response.status_code == 200, response.json()
    described = [[(kind, event) for _, kind, event in lines] for lines in appends]
    assert described == [
        [(p.EVENT_MSG, "turn_started"), (p.TURN_CONTEXT, None), (p.RESPONSE_ITEM, None)],
        [(p.RESPONSE_ITEM, None), (p.EVENT_MSG, "token_count"), (p.EVENT_MSG, "turn_complete")],
    ]
    assert Session.objects.filter(pk=session.pk, lease_holder="", lease_expires_at=None).exists()
    assert RolloutLine.objects.filter(session=session).count() == session.last_seq + 6
