"""The policy's action on a low retention score: a local summary below the floor is made once more with the retry
prompt, and the better-scoring window is installed (one attempt, hooks once)."""

from __future__ import annotations

import asyncio
import json

from compaction_app.engine.compactor import CompactionRequest, HistorySnapshot, run_compaction
from compaction_app.engine.items import user_message
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.windows import WindowState
from tests.compaction_app.engine.fakes import FakeClient, assistant, completed, done

HISTORY = [
    user_message("fix the ledger"),
    {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": json.dumps({"path": "src/ledger.py"})},
    {"type": "function_call_output", "call_id": "c1", "output": "def ledger(): ..."},
]


def compact(client, **settings):
    s = CompactionSettings(model="m", strategy="local", **settings)
    snap = HistorySnapshot(items=HISTORY, active_tokens=100, window=WindowState(0, "w", "w", None), turn_id="t")
    return asyncio.run(run_compaction(snapshot=snap, settings=s, request=CompactionRequest(trigger="manual"),
                                      client=client))


def test_a_low_score_is_retried_with_the_retry_prompt_and_the_better_window_kept():
    client = FakeClient(streams=[[done(assistant("We talked.")), completed(50, 5)],
                                 [done(assistant("Files: src/ledger.py")), completed(60, 6)]])
    outcome = compact(client, retention_floor=0.9, retry_prompt="List every file you read.")
    assert client.requests[1][1]["input"][-1]["content"][0]["text"] == "List every file you read."
    assert outcome.retention_retry == {"score_before": 0.0, "score_after": 1.0, "kept": "retry"}
    assert outcome.summary_text == "Files: src/ledger.py" and outcome.retention.score == 1.0
    assert outcome.call_tokens == 121


def test_a_retry_that_does_no_better_keeps_the_first_summary():
    client = FakeClient(streams=[[done(assistant("We talked.")), completed(50, 5)],
                                 [done(assistant("Still vague.")), completed(60, 6)]])
    outcome = compact(client, retention_floor=0.9, retry_prompt="Try harder.")
    assert outcome.retention_retry["kept"] == "first" and outcome.summary_text == "We talked."


def test_no_retry_above_the_floor_or_without_a_retry_prompt():
    good = [[done(assistant("Files: src/ledger.py")), completed(50, 5)]]
    assert compact(FakeClient(streams=list(good)), retention_floor=0.5, retry_prompt="x").retention_retry is None
    vague = [[done(assistant("We talked.")), completed(50, 5)]]
    assert compact(FakeClient(streams=list(vague)), retention_floor=0.9).retention_retry is None
