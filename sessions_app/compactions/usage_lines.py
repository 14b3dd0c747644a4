"""What a compaction cost, written into its rollout and read back from it (issue 46), so an exported and re-imported
or followed session keeps its net (sessions_app/compactions/roi.py).

Right after the `compacted` line (and its `turn_context`), compactweb writes:
- `compaction_usage`: the compaction call's server usage, in the shape of Codex's `token_count` usage
  (`info.last_token_usage`) under its own type, so the meter (which folds `token_count` as the window's usage) is
  not moved by it;
- `retention_probe_usage`: the model-judged retention check's tokens, in the same shape.

Both name the compaction's `item_id`. Import and follow give each imported compaction the usage lines that follow
its `compacted` line, up to the next one (`usage_after`).
"""

from __future__ import annotations

from bisect import bisect_right

from compaction_app.engine.compactor import CompactionOutcome
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import NewLine

COMPACTION_USAGE = p.COMPACTION_USAGE
PROBE_USAGE = "retention_probe_usage"


def _usage(kind: str, outcome: CompactionOutcome, *, input_tokens: int, output_tokens: int, total: int) -> NewLine:
    return NewLine(p.EVENT_MSG, {
        "type": kind, "item_id": outcome.item_id, "implementation": str(outcome.implementation),
        "info": {"last_token_usage": {
            "input_tokens": input_tokens, "cached_input_tokens": 0, "output_tokens": output_tokens,
            "reasoning_output_tokens": 0, "total_tokens": total,
        }},
    })


def compaction_usage_line(outcome: CompactionOutcome) -> NewLine:
    return _usage(COMPACTION_USAGE, outcome, input_tokens=outcome.call_input_tokens,
                  output_tokens=outcome.call_output_tokens, total=outcome.call_tokens)


def usage_lines(outcome: CompactionOutcome) -> list[NewLine]:
    """The cost lines of an installed compaction: its call's usage and its probes' (each when it spent any)."""
    lines = [compaction_usage_line(outcome)] if outcome.call_tokens else []
    probes = outcome.probe_retention.tokens_spent if outcome.probe_retention is not None else 0
    if probes:
        lines.append(_usage(PROBE_USAGE, outcome, input_tokens=0, output_tokens=0, total=probes))
    return lines


def _total(payload: dict) -> int:
    usage = ((payload.get("info") or {}).get("last_token_usage") or {}).get("total_tokens")
    return usage if isinstance(usage, int) and not isinstance(usage, bool) and usage > 0 else 0


def usage_after(*, session_id: int, compacted_seqs: list[int]) -> dict[int, dict[str, int]]:
    """compacted seq -> {"call_tokens", "probe_tokens"}: the usage lines between each `compacted` line and the
    next one (one query). A rollout written by Codex has none: its compactions cost 0 here, as before."""
    seqs = sorted(compacted_seqs)
    found = {seq: {"call_tokens": 0, "probe_tokens": 0} for seq in seqs}
    if not seqs:
        return found
    every = list(RolloutLine.objects.filter(session_id=session_id, kind=p.COMPACTED, seq__gte=seqs[0])
                 .order_by("seq").values_list("seq", flat=True))
    rows = (RolloutLine.objects.filter(session_id=session_id, kind=p.EVENT_MSG, seq__gt=seqs[0],
                                       payload__type__in=[COMPACTION_USAGE, PROBE_USAGE])
            .order_by("seq").values_list("seq", "payload"))
    for seq, payload in rows:
        owner = every[bisect_right(every, seq) - 1]
        if owner in found and isinstance(payload, dict):
            field = "call_tokens" if payload.get("type") == COMPACTION_USAGE else "probe_tokens"
            found[owner][field] += _total(payload)
    return found
