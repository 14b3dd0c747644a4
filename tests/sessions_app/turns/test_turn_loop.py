"""The turn loop's rules (spec §2.4, §3.2, §3.3, §5.3, §6.2, §6.5), run on an in-memory fold of the rollout."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import is_real_user_message, message_text, user_message
from compaction_app.engine.thresholds import ModelLimits
from sessions_app.simulator.tools import NewContextTool
from sessions_app.turns.loop import TurnConfig, run_turn_loop
from tests.sessions_app.turns.fakes import (
    THREAD,
    FoldPort,
    Reply,
    ScriptedClient,
    assistant,
    bad_request,
    call,
    overloaded,
)

pytestmark = pytest.mark.asyncio

BIG = ModelLimits(slug="big", context_window=128_000)
SMALL = ModelLimits(slug="small", context_window=10_000)  # auto-compact limit 9000, usable 9500


def filler(tokens: int) -> dict:
    # codex_estimate: 4 bytes a token; the JSON frame adds a little.
    return user_message("w" * (tokens * 4))


class EchoTool:
    def spec(self):
        return {"type": "function", "name": "shell", "description": "", "parameters": {"type": "object"}}

    def run(self, arguments, *, rng):
        from sessions_app.simulator.tools import ToolResult

        return ToolResult(output="ok " * 50)


def config(**kwargs) -> TurnConfig:
    async def no_sleep(delay):
        sleeps.append(delay)

    sleeps: list[float] = []
    cfg = TurnConfig(tools=kwargs.pop("tools", {"shell": EchoTool()}), sleep=no_sleep, **kwargs)
    cfg.sleeps = sleeps  # type: ignore[attr-defined]
    return cfg


async def turn(port: FoldPort, client: ScriptedClient, text: str = "fix the bug", cfg: TurnConfig | None = None,
               turn_id: str = "t1"):
    port.new_turn()
    return await run_turn_loop(port=port, client=client, user_input=text, turn_id=turn_id, config=cfg or config())


async def test_previous_model_check_runs_before_the_limit_check_and_before_the_user_input_is_recorded():
    port = FoldPort(current=SMALL, keep_tokens=9_500)  # the downshift compaction leaves it over the new limit
    port.seed([user_message("earlier task"), filler(20_000), assistant("done")], model=BIG)
    client = ScriptedClient([Reply([assistant("ok")], total_tokens=500)])

    result = await turn(port, client, "the new task")

    assert [(c.reason, c.phase) for c in port.compactions] == [
        ("model_downshift", "pre_turn"), ("context_limit", "pre_turn")]
    assert all("the new task" not in c.user_texts for c in port.compactions)
    assert result.ok and result.user_input_recorded
    assert message_text([i for i in port.items if is_real_user_message(i)][-1]) == "the new task"


async def test_model_downshift_compacts_with_the_previous_model():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier"), filler(20_000)], model=BIG)

    await turn(port, ScriptedClient([Reply([assistant("ok")])]))

    assert port.compactions[0].reason == "model_downshift"
    assert port.compactions[0].compact_with.slug == "big"
    assert port.compactions[0].compact_with.context_window == 128_000


async def test_a_switch_to_a_smaller_model_that_still_fits_does_not_compact():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier"), filler(1_000)], model=BIG)

    result = await turn(port, ScriptedClient([Reply([assistant("ok")])]))

    assert result.ok and port.compactions == []


async def test_a_final_answer_over_the_limit_defers_compaction_to_the_next_turns_pre_turn_check():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([assistant("a long answer")], total_tokens=9_600),
                             Reply([assistant("next")], total_tokens=200)])

    first = await turn(port, client, "question one")
    assert first.ok and port.compactions == []
    assert port.active_tokens >= 9_000  # over the 90% limit, and nothing compacted

    await turn(port, client, "question two", turn_id="t2")
    assert [(c.reason, c.phase) for c in port.compactions] == [("context_limit", "pre_turn")]
    assert "question two" not in port.compactions[0].user_texts


async def test_mid_turn_compaction_runs_when_a_tool_output_needs_a_follow_up_and_the_limit_is_reached():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=9_200), Reply([assistant("done")])])

    result = await turn(port, client)

    assert [(c.reason, c.phase) for c in port.compactions] == [("context_limit", "mid_turn")]
    assert result.ok and result.sampling_requests == 2
    # The follow-up request went out after the compaction, with the compacted history.
    assert any("SUMMARY" in message_text(i) for i in client.requests[1].input if i.get("type") == "message")


async def test_no_mid_turn_compaction_below_the_limit():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=1_000), Reply([assistant("done")])])

    result = await turn(port, client)

    assert result.ok and result.tool_calls == 1 and port.compactions == []


async def test_a_turn_publishes_no_progress_event_of_its_own_only_its_rollout_lines():
    # Its start, requests and end are in the lines every page follows; a transient event would only cost a send.
    port = FoldPort(current=SMALL)
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=1_000), Reply([assistant("done")])])

    result = await turn(port, client)

    assert result.ok and result.sampling_requests == 2
    assert port.events == []
    assert port.kinds()[1] == "event:turn_started" and port.kinds()[-1] == "event:turn_complete"


async def test_new_context_triggers_a_mid_turn_compaction_in_token_budget_mode_even_under_the_limit():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([call("new_context", "c1")], total_tokens=500), Reply([assistant("fresh")])])
    cfg = config(tools={"shell": EchoTool(), "new_context": NewContextTool()})

    result = await turn(port, client, cfg=cfg)

    assert [(c.reason, c.phase) for c in port.compactions] == [("context_limit", "mid_turn")]
    assert result.ok


async def test_full_context_is_reinjected_after_a_pre_turn_compaction():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier"), filler(9_500)])
    client = ScriptedClient([Reply([assistant("ok")])])

    await turn(port, client, "after the limit")

    # spec §5.3 DoNotInject: [kept user msgs, summary, <full initial context>, turn_context, new user message]
    compacted = max(ln.seq for ln in port.lines if ln.kind == "compacted")
    assert port.kinds(compacted)[:4] == [
        "item:message:developer", "item:message:user", "turn_context", "item:message:user"]
    items = port.items
    start = next(i for i, item in enumerate(items) if item.get("role") == "developer")
    assert [message_text(i) for i in items[start + 2:start + 3]] == ["after the limit"]


async def test_context_is_not_reinjected_on_the_turn_after_a_mid_turn_compaction():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=9_200), Reply([assistant("done")]),
                             Reply([assistant("second")])])
    await turn(port, client, "first")
    assert port.compactions[-1].phase == "mid_turn"
    before = port.last_seq

    await turn(port, client, "second", turn_id="t2")

    assert port.kinds(before)[:3] == ["event:turn_started", "turn_context", "item:message:user"]
    developer_messages = [i for i in port.items if i.get("role") == "developer"]
    assert len(developer_messages) == 1  # only the copy the mid-turn compaction placed


async def test_first_turn_of_a_session_without_context_injects_it_before_the_user_message():
    port = FoldPort(current=SMALL)
    client = ScriptedClient([Reply([assistant("hello")])])

    await turn(port, client, "hi")

    assert port.kinds()[1:6] == ["event:turn_started", "item:message:developer", "item:message:user",
                                 "turn_context", "item:message:user"]


async def test_a_failed_pre_turn_compaction_ends_the_turn_without_sampling_or_recording_the_input():
    port = FoldPort(current=SMALL, fail_compaction="provider overloaded")
    port.seed([user_message("earlier"), filler(9_500)])
    client = ScriptedClient([])

    result = await turn(port, client, "never recorded")

    assert not result.ok and result.error == "provider overloaded" and not result.user_input_recorded
    assert client.requests == []
    assert all(message_text(i) != "never recorded" for i in port.items)
    assert port.kinds()[-3:] == ["event:turn_started", "event:error", "event:turn_complete"]


async def test_a_failed_mid_turn_compaction_stops_the_loop_before_the_follow_up_request():
    port = FoldPort(current=SMALL, fail_compaction="two compaction items")
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=9_200)])

    result = await turn(port, client)

    assert not result.ok and result.sampling_requests == 1 and len(client.requests) == 1
    assert port.kinds()[-2:] == ["event:error", "event:turn_complete"]


async def test_retryable_provider_errors_are_retried_with_backoff():
    port = FoldPort(current=SMALL)
    client = ScriptedClient([Reply([], error=overloaded()), Reply([], error=overloaded()),
                             Reply([assistant("made it")])])
    cfg = config(stream_max_retries=5)

    result = await turn(port, client, cfg=cfg)

    assert result.ok and result.final_message == "made it"
    assert len(cfg.sleeps) == 2 and 0.18 <= cfg.sleeps[0] < 0.22 and 0.36 <= cfg.sleeps[1] < 0.44
    assert [d["message"] for k, d in port.events if k == "stream_error"] == ["Reconnecting... 1/5",
                                                                             "Reconnecting... 2/5"]


async def test_a_provider_failure_ends_the_turn_with_an_error_line():
    port = FoldPort(current=SMALL)
    client = ScriptedClient([Reply([], error=bad_request())])

    result = await turn(port, client)

    assert not result.ok and result.error_code == "invalid_request" and result.user_input_recorded
    error = [ln.payload for ln in port.lines if ln.kind == "event_msg" and ln.payload["type"] == "error"]
    assert error == [{"type": "error", "turn_id": "t1", "message": "bad request", "codex_error_info": "invalid_request"}]


async def test_exhausted_retries_end_the_turn():
    port = FoldPort(current=SMALL)
    client = ScriptedClient([Reply([], error=overloaded())] * 3)

    result = await turn(port, client, cfg=config(stream_max_retries=2))

    assert not result.ok and result.error_code == "server_overloaded" and len(client.requests) == 3


async def test_each_response_usage_becomes_the_meter_base_and_tool_outputs_are_added():
    port = FoldPort(current=BIG)
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=3_000), Reply([assistant("done")],
                                                                                      total_tokens=3_400)])
    seen = []
    original = port.record

    async def spy(records):
        await original(records)
        seen.append(port.active_tokens)

    port.record = spy
    await turn(port, client)

    output = next(ln for ln in port.lines if ln.kind == "response_item" and ln.payload["type"] == "function_call_output")
    assert 3_000 + output.tokens in seen  # spec §3.2: last usage + items after the last model item
    assert port.active_tokens == 3_400


async def test_requests_carry_the_window_id_cache_key_instructions_and_tools():
    port = FoldPort(current=SMALL)
    port.seed([user_message("earlier")])
    client = ScriptedClient([Reply([call("shell", "c1")], total_tokens=9_200), Reply([assistant("done")])])

    await turn(port, client, cfg=config(base_instructions="be brief"))

    first, second = client.requests
    assert first.client_metadata == {"x-codex-window-id": f"{THREAD}:0"}
    assert second.client_metadata == {"x-codex-window-id": f"{THREAD}:1"}  # after the mid-turn compaction
    assert first.prompt_cache_key == THREAD and first.instructions == "be brief"
    assert [t["name"] for t in first.tools] == ["shell"]
    assert first.input[-1] == user_message("fix the bug")


async def test_the_turn_context_records_the_model_the_next_previous_model_check_reads():
    port = FoldPort(current=SMALL)
    await turn(port, ScriptedClient([Reply([assistant("ok")])]))

    context = [ln.payload for ln in port.lines if ln.kind == "turn_context"][-1]
    assert context == {"turn_id": "t1", "model": "small", "context_window": 10_000,
                       "effective_context_window_percent": 95}
