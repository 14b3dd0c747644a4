"""A compaction's net return in tokens (and money, when the provider has a price), issue 32.

    net = tokens freed × requests that followed it − the compaction call − the probes − the re-read tax

- **tokens freed** is the window before minus after: every request that followed the compaction (until the next
  installed compaction of the session) sent that many fewer input tokens than it would have without it;
- **requests that followed** are counted from the rollout's server usage lines (`token_count` events a sampling
  request writes; estimate recomputes are not requests);
- **the compaction call** is its server usage (input + output; 0 for token budget and plain masking), also in the
  rollout as a `compaction_usage` line; **probes** the model-judged retention check's tokens, a
  `retention_probe_usage` line (both read back by import and follow: usage_lines.py);
- **the re-read tax** counts only fetches, within the watch window, of content the compaction dropped and that had
  not changed since (docs/alerts.md): re-running tests or re-applying a patch is not counted; also in the rollout,
  as `compaction_reread_usage` lines naming the compaction's window (read back by import and follow too).

A session's net is the sum over its installed (not rolled-back) compactions.
"""

from __future__ import annotations

from bisect import bisect_right
from decimal import Decimal
from typing import Any

from compaction_app.models import Compaction
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p


def _request_seqs(session_id: int) -> list[int]:
    """Seqs of the session's server usage lines (one per sampling request), in order."""
    rows = RolloutLine.objects.filter(session_id=session_id, kind=p.EVENT_MSG, payload__type="token_count")
    return [seq for seq, source in rows.order_by("seq").values_list("seq", "payload__source") if source != "estimate"]


def _figures(compaction: Compaction, requests: int, price: Decimal | None) -> dict[str, Any]:
    freed = compaction.tokens_freed  # negative for a compaction that grew the window: it cost on every request
    saved = freed * requests
    net = saved - compaction.call_tokens - compaction.probe_tokens - compaction.reread_tokens
    return {
        "requests_after": requests,
        "tokens_saved_over_requests": saved,
        "net_tokens": net,
        # Words for a reader, not a value a client parses (those are the fields beside it): thousands separators.
        "net_formula": (f"{freed:,} freed × {requests:,} request(s) − {compaction.call_tokens:,} call − "
                        f"{compaction.probe_tokens:,} probes − {compaction.reread_tokens:,} re-read = {net:,}"),
        "price_per_million_tokens": float(price) if price is not None else None,
        "net_cost_saved": float(Decimal(net) * price / Decimal(1_000_000)) if price is not None else None,
    }


def session_roi(*, session_id: int) -> dict[int, dict[str, Any]]:
    """Each installed compaction's net figures, by compaction id (two queries whatever the session's length)."""
    compactions = list(Compaction.objects.filter(session_id=session_id, rolled_back=False)
                       .select_related("session__provider").order_by("rollout_seq"))
    if not compactions:
        return {}
    seqs = _request_seqs(session_id)
    price = compactions[0].session.provider.price_per_million_tokens
    found = {}
    for index, compaction in enumerate(compactions):
        end = compactions[index + 1].rollout_seq if index + 1 < len(compactions) else None
        start = bisect_right(seqs, compaction.rollout_seq)
        stop = bisect_right(seqs, end) if end is not None else len(seqs)
        # The newest installed compaction's net is open: each request of the session adds its tokens freed, so
        # the figure moves between two reloads of a running session's inspector (issue 47 item 9 says why).
        found[compaction.pk] = {**_figures(compaction, max(0, stop - start), price), "net_open": end is None}
    return found


def session_net(*, session_id: int) -> dict[str, Any]:
    """The session's net: the sum over its installed compactions."""
    figures = session_roi(session_id=session_id).values()
    net = sum(f["net_tokens"] for f in figures)
    costs = [f["net_cost_saved"] for f in figures if f["net_cost_saved"] is not None]
    return {"compactions": len(figures), "net_tokens": net, "net_cost_saved": sum(costs) if costs else None}


def compaction_roi(*, compaction: Compaction) -> dict[str, Any]:
    """One compaction's net figures (a rolled-back compaction saved nothing after its rollback: its figures are
    those of the requests up to the rollback's next compaction, if any, as for an installed one)."""
    figures = session_roi(session_id=compaction.session_id)
    if compaction.pk in figures:
        return figures[compaction.pk]
    return _figures(compaction, 0, compaction.session.provider.price_per_million_tokens)
