"""What a compaction cost, written into its rollout and read back from it (issue 46), so an exported and re-imported
or followed session keeps its net (sessions_app/compactions/roi.py).

Right after the `compacted` line (and its `turn_context`), compactweb writes:
- `compaction_usage`: the compaction call's server usage, in the shape of Codex's `token_count` usage
  (`info.last_token_usage`) under its own type, so the meter (which folds `token_count` as the window's usage) is
  not moved by it;
- `retention_probe_usage`: the model-judged retention check's tokens, in the same shape.

Later, after the turns that re-read what a compaction dropped (sessions_app/compactions/alerts.py), compactweb writes
- `compaction_reread_usage`: the re-read tax added to that compaction, in the same shape, naming the compaction by
  its `window_id` (and `window_number`): it comes after later lines, possibly after a later compaction, so it is
  matched by window, not by position. A followed session's rollout is the file's and gets none.

Both name the compaction's `item_id`. Import and follow give each imported compaction the usage lines that follow
its `compacted` line, up to the next one (`usage_after`); a follower that reads the usage lines in a later read than
their `compacted` line (the file was read between the two writes) adds them to that compaction then
(`add_late_usage`).
"""

from __future__ import annotations

from bisect import bisect_right

from compaction_app import records
from compaction_app.engine.compactor import CompactionOutcome
from compaction_app.models import Compaction
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p
from sessions_app.rollout.services import NewLine

COMPACTION_USAGE = p.COMPACTION_USAGE
PROBE_USAGE = "retention_probe_usage"
REREAD_USAGE = "compaction_reread_usage"


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


def reread_line(*, window_id: str, window_number: int, tokens: int) -> NewLine:
    """The re-read tax measured after a compaction, named by the window the compaction opened."""
    return NewLine(p.EVENT_MSG, {
        "type": REREAD_USAGE, "window_id": window_id, "window_number": window_number,
        "info": {"last_token_usage": {"input_tokens": tokens, "cached_input_tokens": 0, "output_tokens": 0,
                                      "reasoning_output_tokens": 0, "total_tokens": tokens}},
    })


def _reread_owner(session_id: int, payload: dict) -> int | None:
    """The compaction a re-read line names: by the window id it opened, else by its window number."""
    found = Compaction.objects.filter(session_id=session_id)
    window_id = payload.get("window_id")
    if window_id:
        return found.filter(window_id=window_id).order_by("-rollout_seq").values_list("pk", flat=True).first()
    number = payload.get("window_number")
    if isinstance(number, int) and not isinstance(number, bool) and number > 0:
        return found.filter(window_number=number).order_by("-rollout_seq").values_list("pk", flat=True).first()
    return None


def add_reread_lines(*, session_id: int, rows: list[RolloutLine]) -> int:
    """Give each re-read line among `rows` to the compaction it names (import: every line once the compactions
    exist; follow: as the lines arrive). Returns the lines applied."""
    applied = 0
    for row in rows:
        if row.kind != p.EVENT_MSG or not isinstance(row.payload, dict) or row.payload.get("type") != REREAD_USAGE:
            continue
        owner = _reread_owner(session_id, row.payload)
        tokens = _total(row.payload)
        if owner is not None and tokens:
            records.add_reread_tokens(compaction_id=owner, tokens=tokens)
            applied += 1
    return applied


def is_usage_line(kind: str, payload: object) -> bool:
    return kind == p.EVENT_MSG and isinstance(payload, dict) and payload.get("type") in (COMPACTION_USAGE, PROBE_USAGE)


def add_late_usage(*, session_id: int, rows: list[RolloutLine]) -> int:
    """Give appended usage lines to the compaction they follow when its `compacted` line was appended by an earlier
    write (a compacted line appended with them was costed by `usage_after` already). Returns the lines applied."""
    usage = [r for r in rows if is_usage_line(r.kind, r.payload)]
    if not usage:
        return 0
    appended = {r.seq for r in rows if r.kind == p.COMPACTED}
    applied = 0
    for row in usage:
        owner = (RolloutLine.objects.filter(session_id=session_id, kind=p.COMPACTED, seq__lt=row.seq)
                 .order_by("-seq").values_list("seq", flat=True).first())
        if owner is None or owner in appended:
            continue
        compaction = Compaction.objects.filter(session_id=session_id, rollout_seq=owner).values_list("pk", flat=True)
        pk = compaction.first()
        if pk is None:
            continue
        field = "call_tokens" if row.payload.get("type") == COMPACTION_USAGE else "probe_tokens"
        records.add_cost_tokens(compaction_id=pk, **{field: _total(row.payload)})
        applied += 1
    return applied
