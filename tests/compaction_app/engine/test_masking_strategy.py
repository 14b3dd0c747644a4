"""Observation masking through run_compaction: old outputs become placeholders that keep the call pairing, no model
call; the hybrid summarises only when masking is not enough; masking that frees nothing changes nothing."""

from __future__ import annotations

import asyncio
import json

from compaction_app.engine.compactor import CompactionRequest, HistorySnapshot, run_compaction
from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.strategies.masking import MASKED_MARKER, NOTHING_TO_MASK
from compaction_app.engine.windows import WindowState
from tests.compaction_app.engine.fakes import FakeClient, assistant, completed, done

BIG = "Exit code: 1\nOutput:\n" + "FAILED tests/test_x.py::test_y AssertionError\n" * 200


def turn(n: int) -> list[dict]:
    return [user_message(f"task {n}"),
            {"type": "function_call", "call_id": f"c{n}", "name": "shell", "arguments": json.dumps({"command": "pytest"})},
            {"type": "function_call_output", "call_id": f"c{n}", "output": BIG}]


def compact(items, client=None, **settings):
    s = CompactionSettings(model="m", strategy="masking", **{"context_window": 100_000, **settings})
    snap = HistorySnapshot(items=items, active_tokens=50_000, window=WindowState(0, "w0", "w0", None), turn_id="t")
    return asyncio.run(run_compaction(snapshot=snap, settings=s, request=CompactionRequest(trigger="manual"),
                                      client=client))


def test_outputs_older_than_the_window_are_masked_and_keep_their_call_id():
    items = turn(1) + turn(2) + turn(3)
    outcome = compact(items, masking_keep_turns=1)
    assert outcome.ok and str(outcome.implementation) == "observation_masking" and outcome.masked_outputs == 2
    history = outcome.replacement_history
    assert [i.get("call_id") for i in history] == [i.get("call_id") for i in items]
    assert [i["output"].startswith(MASKED_MARKER) for i in history if i["type"] == "function_call_output"] == [
        True, True, False]
    assert outcome.tokens_after < outcome.tokens_before
    assert outcome.call_tokens == 0
    forgotten = {f.text for f in outcome.retention.forgotten}
    assert "exit 1 of pytest" not in forgotten  # the newest run still shows it


def test_a_token_window_keeps_the_newest_outputs_that_fit():
    items = turn(1) + turn(2) + turn(3)
    outcome = compact(items, masking_keep_tokens=1)
    masked = [i["output"].startswith(MASKED_MARKER) for i in outcome.replacement_history
              if i["type"] == "function_call_output"]
    assert masked == [True, True, True]


def test_masking_that_frees_nothing_fails_and_installs_nothing():
    outcome = compact(turn(1), masking_keep_turns=2)
    assert not outcome.ok and outcome.error.kind == NOTHING_TO_MASK and outcome.replacement_history is None


def test_the_hybrid_summarises_the_masked_history_only_when_masking_is_not_enough():
    items = turn(1) + turn(2)
    client = FakeClient(streams=[[done(assistant("short summary")), completed(100, 10)]])
    # A tiny window: masking alone leaves the history above half the limit, so the summariser runs on it.
    outcome = compact(items, client=client, masking_summarise=True, masking_keep_turns=1, context_window=2_000)
    assert outcome.ok and outcome.summary_text == "short summary" and outcome.call_tokens == 110
    sent = client.requests[0][1]["input"]
    assert any(MASKED_MARKER in str(i.get("output", "")) for i in sent)
    assert outcome.replacement_history[-1]["content"][0]["text"] == f"{SUMMARY_PREFIX}\nshort summary"
    roomy = compact(items, client=FakeClient(), masking_summarise=True, masking_keep_turns=1)
    assert roomy.ok and roomy.summary_text is None
