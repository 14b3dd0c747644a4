"""A rollout measured by the fold: its compactions, peak and final tokens, tokens saved (spec §3.2). Import
labels its compactions with these figures; the replay comparison sets two sessions' figures side by side."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from compaction_app.engine import meter as m
from sessions_app.models import Session
from sessions_app.rollout import projection as p
from sessions_app.transfer.lines import fold_lines


@dataclass(frozen=True)
class CompactionFigures:
    """One compacted line measured by the fold: active tokens (the meter, spec §3.2) and the history estimate
    (base instructions + every item's stored count) right before and right after it."""

    seq: int
    active_before: int
    active_after: int
    estimate_before: int
    estimate_after: int


@dataclass
class RolloutFigures:
    """A whole rollout measured: its compactions, the peak of the history estimate, the final state."""

    compactions: list[CompactionFigures] = field(default_factory=list)
    peak_estimate: int = 0
    peak_active: int = 0
    final_estimate: int = 0
    final_items: int = 0

    @property
    def tokens_saved(self) -> int:
        return sum(max(0, c.estimate_before - c.estimate_after) for c in self.compactions)

    def as_dict(self) -> dict[str, int]:
        return {
            "compactions": len(self.compactions),
            "peak_tokens": self.peak_estimate,
            "tokens_saved": self.tokens_saved,
            "final_tokens": self.final_estimate,
            "final_items": self.final_items,
            "peak_active_tokens": self.peak_active,
        }


def _estimate(header: p.Header) -> int:
    return header.meter.base_tokens + header.meter.history_tokens


def measure_rollout(lines: Iterable[p.Line]) -> RolloutFigures:
    """Fold a rollout and measure it. Peaks and savings use the history estimate so that a session with server
    usage (an imported Codex rollout) and its replay (estimates only) compare like with like."""
    projection = p.Projection()
    figures = RolloutFigures()
    for line in lines:
        before = projection.header
        projection.apply(line)
        after = projection.header
        if line.kind == p.COMPACTED:
            figures.compactions.append(
                CompactionFigures(
                    seq=line.seq, active_before=m.active_total(before.meter), active_after=m.active_total(after.meter),
                    estimate_before=_estimate(before), estimate_after=_estimate(after),
                )
            )
        figures.peak_estimate = max(figures.peak_estimate, _estimate(after))
        figures.peak_active = max(figures.peak_active, m.active_total(after.meter))
    figures.final_estimate = _estimate(projection.header)
    figures.final_items = len(projection.entries)
    return figures


def session_figures(*, session: Session) -> dict[str, int]:
    """Compactions, peak tokens, tokens saved and the final state of one session, from its rollout."""
    figures = measure_rollout(fold_lines(session.pk)).as_dict()
    figures["failed_compactions"] = session.compaction_attempts.filter(status="failed").count()
    return figures
