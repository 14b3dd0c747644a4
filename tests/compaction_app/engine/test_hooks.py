"""PreCompact / PostCompact hooks (spec §7)."""

from __future__ import annotations

import asyncio
import copy
import json
import threading

import httpx
import pytest

from compaction_app.engine.compactor import CompactionRequest
from compaction_app.engine.hooks import HookContext, HookRunner, HookSpec, hook_request, resolve_callable
from compaction_app.engine.vocabulary import HookEvent
from tests.compaction_app.engine.fakes import (
    FakeClient,
    assistant,
    completed,
    done,
    make_settings,
    make_snapshot,
    run,
)

SEEN: list[dict] = []


def record_hook(request):
    SEEN.append(request)
    return None


def stop_hook(request):
    return {"continue": False, "stopReason": "operator froze compactions"}


def failing_hook(request):
    raise RuntimeError("hook crashed")


async def async_stop_hook(request):
    return {"continue": False, "stopReason": "async says no"}


async def slow_hook(request):
    await asyncio.sleep(5)


MOD = __name__


def ok_client():
    return FakeClient(streams=[[done(assistant("S")), completed()]])


def test_pre_compact_stop_interrupts_and_changes_nothing():
    snapshot = make_snapshot()
    before = copy.deepcopy(snapshot)
    client = ok_client()
    hooks = HookRunner([HookSpec("freeze", "pre_compact", "callable", f"{MOD}.stop_hook")])
    outcome = run(snapshot=snapshot, settings=make_settings(), request=CompactionRequest(trigger="manual"),
                  client=client, hooks=hooks)
    assert not outcome.ok and outcome.status == "interrupted"
    assert client.requests == []
    assert outcome.stop_reason == "operator froze compactions"
    assert outcome.error.message == "operator froze compactions"
    assert [e.type for e in outcome.events] == ["turn_started", "hook_started", "hook_completed", "turn_aborted"]
    assert outcome.attempts[0].status == "interrupted"
    assert outcome.hook_runs[0].status == "stopped"
    assert outcome.window == snapshot.window and snapshot == before


def test_post_compact_stop_keeps_the_new_history_and_reports_the_stop():
    hooks = HookRunner([HookSpec("after", "post_compact", "callable", f"{MOD}:async_stop_hook")])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=CompactionRequest(trigger="manual"),
                  client=ok_client(), hooks=hooks)
    assert outcome.ok and outcome.post_compact_stopped and outcome.stop_reason == "async says no"
    assert outcome.events[-1].type == "turn_aborted"
    assert outcome.attempts[0].status == "completed"


def test_failing_hook_is_recorded_and_does_not_stop_the_compaction():
    hooks = HookRunner([HookSpec("crash", "pre_compact", "callable", f"{MOD}.failing_hook"),
                        HookSpec("missing", "pre_compact", "callable", "no_such_module.hook")])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=CompactionRequest(trigger="manual"),
                  client=ok_client(), hooks=hooks)
    assert outcome.ok
    assert [(r.name, r.status, r.error) for r in outcome.hook_runs] == [
        ("crash", "failed", "hook crashed"), ("missing", "failed", "No module named 'no_such_module'")]


def test_hook_request_carries_the_spec_fields():
    SEEN.clear()
    hooks = HookRunner([HookSpec("pre", "pre_compact", "callable", f"{MOD}.record_hook"),
                        HookSpec("post", "post_compact", "callable", f"{MOD}.record_hook")])
    run(snapshot=make_snapshot(), settings=make_settings(), request=CompactionRequest(trigger="auto",
                                                                                      phase="mid_turn"),
        client=ok_client(), hooks=hooks)
    common = {"session_id": "sess-1", "turn_id": "turn-1", "cwd": "/repo",
              "transcript_path": "/rollouts/sess-1.jsonl", "model": "gpt-test", "trigger": "auto",
              "reason": "context_limit", "phase": "mid_turn", "implementation": "responses"}
    assert SEEN == [{**common, "hook_event_name": "PreCompact"},
                    {**common, "hook_event_name": "PostCompact", "status": "completed"}]


def test_matchers_select_hooks_by_trigger():
    SEEN.clear()
    hooks = HookRunner([HookSpec("manual-only", "pre_compact", "callable", f"{MOD}.record_hook", matcher="manual"),
                        HookSpec("auto-only", "pre_compact", "callable", f"{MOD}.stop_hook", matcher="auto")])
    outcome = run(snapshot=make_snapshot(), settings=make_settings(), request=CompactionRequest(trigger="manual"),
                  client=ok_client(), hooks=hooks)
    assert outcome.ok and [r.name for r in outcome.hook_runs] == ["manual-only"] and len(SEEN) == 1


def test_async_hook_timeout_is_a_failed_run():
    runner = HookRunner([HookSpec("slow", "pre_compact", "callable", f"{MOD}.slow_hook", timeout=0.01)])
    result = asyncio.run(runner.run(HookEvent.PRE_COMPACT, {"trigger": "auto"}, lambda e: None))
    assert not result.stopped and result.records[0].status == "failed" and result.records[0].error == "timed out"


def _webhook_runner(handler, **spec_kwargs):
    spec = HookSpec("hook", "pre_compact", "webhook", "https://hooks.example/compact", **spec_kwargs)
    return HookRunner([spec], transport=httpx.MockTransport(handler))


def test_webhook_posts_json_and_a_false_continue_stops():
    received = []

    def handler(request: httpx.Request) -> httpx.Response:
        received.append((request.method, str(request.url), json.loads(request.content)))
        return httpx.Response(200, json={"continue": False, "stopReason": "quota"})

    payload = {"trigger": "auto", "turn_id": "t"}
    result = asyncio.run(_webhook_runner(handler).run(HookEvent.PRE_COMPACT, payload, lambda e: None))
    assert received == [("POST", "https://hooks.example/compact", payload)]
    assert result.stopped and result.stop_reason == "quota"
    assert result.records[0].output == {"continue": False, "stopReason": "quota"}


def test_webhook_with_empty_answer_continues():
    result = asyncio.run(_webhook_runner(lambda r: httpx.Response(204)).run(
        HookEvent.PRE_COMPACT, {"trigger": "auto"}, lambda e: None))
    assert not result.stopped and result.records[0].status == "completed"


def test_webhook_http_error_is_a_failed_run_that_does_not_stop():
    result = asyncio.run(_webhook_runner(lambda r: httpx.Response(500)).run(
        HookEvent.PRE_COMPACT, {"trigger": "auto"}, lambda e: None))
    assert not result.stopped
    assert (result.records[0].status, result.records[0].error) == ("failed", "webhook answered HTTP 500")


def test_webhook_timeout_is_a_failed_run():
    def handler(request):
        raise httpx.ReadTimeout("slow", request=request)

    result = asyncio.run(_webhook_runner(handler).run(HookEvent.PRE_COMPACT, {"trigger": "auto"}, lambda e: None))
    assert (result.records[0].status, result.records[0].error) == ("failed", "timed out")


def test_hook_spec_rejects_bad_configuration():
    with pytest.raises(ValueError):
        HookSpec("w", "pre_compact", "webhook", "ftp://x")
    with pytest.raises(ValueError):
        HookSpec("c", "pre_compact", "callable", "x.y", timeout=0)
    with pytest.raises(ValueError):
        HookSpec("c", "sometimes", "callable", "x.y")


def test_resolve_callable_accepts_both_path_forms():
    assert resolve_callable(f"{MOD}.stop_hook") is stop_hook
    assert resolve_callable(f"{MOD}:stop_hook") is stop_hook
    with pytest.raises(ValueError):
        resolve_callable("nodots")


def test_a_hook_cannot_change_the_request_later_hooks_see():
    seen = []

    def mutate(request):
        request["model"] = "hijacked"

    def observe(request):
        seen.append(request["model"])

    funcs = {"m": mutate, "o": observe}
    runner = HookRunner([HookSpec("m", "pre_compact", "callable", "m"), HookSpec("o", "pre_compact", "callable", "o")],
                        resolver=lambda path: funcs[path])
    context = HookContext(session_id="s", turn_id="t", cwd="/", transcript_path=None, trigger="auto",
                          reason="context_limit", phase="pre_turn", implementation="responses")
    request = hook_request(event=HookEvent.PRE_COMPACT, context=context, model="real")
    asyncio.run(runner.run(HookEvent.PRE_COMPACT, request, lambda e: None))
    assert seen == ["real"] and request["model"] == "real"


GATE = threading.Event()
STUCK = threading.Event()


def waits_for_the_gate(request):
    """Returns only once the event loop side opened the gate: it deadlocks if it runs on the loop's thread."""
    if not GATE.wait(timeout=5):
        raise RuntimeError("the event loop never ran while the hook waited")
    return {"continue": True}


def never_returns_in_time(request):
    STUCK.wait(timeout=5)


def test_a_synchronous_hook_runs_off_the_event_loop():
    GATE.clear()
    runner = HookRunner([HookSpec("gate", "pre_compact", "callable", f"{MOD}.waits_for_the_gate", timeout=5)])

    async def main():
        async def open_gate():
            await asyncio.sleep(0)
            GATE.set()

        result, _ = await asyncio.gather(runner.run(HookEvent.PRE_COMPACT, {"trigger": "auto"}, lambda e: None),
                                         open_gate())
        return result

    result = asyncio.run(main())
    assert result.records[0].status == "completed"


def test_a_synchronous_hook_past_its_timeout_is_a_failed_run():
    STUCK.clear()
    runner = HookRunner([HookSpec("stuck", "pre_compact", "callable", f"{MOD}.never_returns_in_time", timeout=0.05)])
    try:
        result = asyncio.run(runner.run(HookEvent.PRE_COMPACT, {"trigger": "auto"}, lambda e: None))
    finally:
        STUCK.set()
    assert not result.stopped and result.records[0].status == "failed" and result.records[0].error == "timed out"
