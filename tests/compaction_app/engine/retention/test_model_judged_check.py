"""The model-judged check against the embedded simulated model, which answers probes extractively: it recalls what
its own opaque compaction item remembers (files, commands), which the structural check cannot see."""

from __future__ import annotations

import asyncio
import json

from compaction_app.engine.compactor import CompactionRequest, HistorySnapshot, run_compaction
from compaction_app.engine.items import user_message
from compaction_app.engine.settings import CompactionSettings
from compaction_app.engine.windows import WindowState
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.factory import build_client

HISTORY = [
    user_message("Fix the rounding bug in src/billing/split.py"),
    {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": json.dumps({"path": "src/ledger.py"})},
    {"type": "function_call_output", "call_id": "c1", "output": "def ledger(): ..."},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Read the ledger."}]},
]


def test_probes_credit_what_the_compaction_item_remembers_and_record_their_tokens():
    settings = CompactionSettings(model="sim", strategy="remote_v1", remote_compaction="v1", retention_probes=True)
    client = build_client(ProviderConfig(name="sim", model="sim", remote_compaction="v1"))
    snap = HistorySnapshot(items=HISTORY, active_tokens=100, window=WindowState(0, "w", "w", None), turn_id="t")
    outcome = asyncio.run(run_compaction(snapshot=snap, settings=settings, request=CompactionRequest(trigger="manual"),
                                         client=client))
    assert outcome.ok
    structural = {v.fact.text: v.kept for v in outcome.retention.verdicts}
    judged = {v.fact.text: v.kept for v in outcome.probe_retention.verdicts}
    assert structural["src/ledger.py"] is False  # the compaction item is opaque to the structural check
    assert judged["src/ledger.py"] is True       # the model remembers it
    assert outcome.probe_retention.tokens_spent > 0
    assert set(outcome.probe_retention.answers) == {"artifact_trail"}  # one probe per category with facts


def test_a_fact_the_new_window_dropped_gets_no_answer_and_the_probes_cost_is_recorded():
    """Token budget keeps only the initial context: asked from that window alone, the simulated model cannot name
    the file it read or the user's goal, so the model-judged check calls them lost (it is not told the facts)."""
    settings = CompactionSettings(model="sim", strategy="token_budget", retention_probes=True)
    client = build_client(ProviderConfig(name="sim", model="sim"))
    snap = HistorySnapshot(items=HISTORY, active_tokens=100, window=WindowState(0, "w", "w", None), turn_id="t")
    outcome = asyncio.run(run_compaction(snapshot=snap, settings=settings, request=CompactionRequest(trigger="manual"),
                                         client=client))
    assert outcome.ok and outcome.probe_retention is not None
    judged = {v.fact.kind.value: v.kept for v in outcome.probe_retention.verdicts}
    assert judged["goal"] is False and judged["file_read"] is False
    assert all("src/ledger.py" not in answer for answer in outcome.probe_retention.answers.values())
    assert outcome.probe_retention.tokens_spent > 0


def test_probes_are_off_unless_the_policy_turns_them_on():
    assert CompactionSettings(model="sim").retention_probes is False
    from compaction_app.models import CompactionPolicy

    assert CompactionPolicy._meta.get_field("retention_probes").default is False
