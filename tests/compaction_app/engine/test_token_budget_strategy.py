"""Token budget / new context window (spec §4.4)."""

from __future__ import annotations

from compaction_app.engine.compactor import CompactionRequest
from compaction_app.engine.hooks import HookRunner, HookSpec
from tests.compaction_app.engine.fakes import INITIAL_CONTEXT, event_types, make_settings, make_snapshot, run

TB = dict(token_budget=True, remote_compaction="v2", remote_compaction_v2=True)


def test_token_budget_replaces_history_with_initial_context_only_and_calls_no_model():
    outcome = run(snapshot=make_snapshot(prefill=1234), settings=make_settings(**TB),
                  request=CompactionRequest(trigger="auto", phase="pre_turn"), client=None)
    assert outcome.ok and outcome.strategy == "token_budget"
    assert outcome.replacement_history == INITIAL_CONTEXT
    assert outcome.message == "" and outcome.reference_context_set is True and outcome.prefill_cleared is True
    assert (outcome.window.number, outcome.window.previous_window_id) == (4, "w3")
    assert event_types(outcome) == ["item_started", "token_count", "item_completed", "context_compacted"]


def test_manual_token_budget_runs_the_full_lifecycle_with_hooks():
    calls = []

    def resolver(path):
        return lambda request: calls.append(request["hook_event_name"])

    hooks = HookRunner([HookSpec("pre", "pre_compact", "callable", "x.y"),
                        HookSpec("post", "post_compact", "callable", "x.y")], resolver=resolver)
    outcome = run(snapshot=make_snapshot(), settings=make_settings(**TB),
                  request=CompactionRequest(trigger="manual"), client=None, hooks=hooks)
    assert calls == ["PreCompact", "PostCompact"]
    assert event_types(outcome) == ["turn_started", "hook_started", "hook_completed", "item_started",
                                    "token_count", "item_completed", "context_compacted", "hook_started",
                                    "hook_completed", "turn_complete"]
    assert outcome.attempts[0].implementation == "token_budget"
