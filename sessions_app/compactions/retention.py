"""The Django side of retention scores, pinned context and compaction cost (issue 18; the rules are pure, in
compaction_app/engine/retention/ and engine/pins.py).

- `retention_fields`: the Compaction row's columns for one outcome (scores, cost, flag), written with the row;
- pins live in the rollout as `event_msg` lines (`pin_added` / `pin_removed`), so rollback, export and replay keep
  them; `session_pins` folds them; `do_add_pin` / `do_remove_pin` append them;
- `retention_rollup`: analytics by strategy, policy and model with ORM aggregates in the database.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Avg, Count, F, Q, Sum
from django.db.models.functions import TruncDate

from compaction_app.engine.compactor import CompactionOutcome
from compaction_app.engine.pins import (
    PIN_ADDED,
    PIN_EVENTS,
    PIN_REMOVED,
    Pin,
    check_budget,
    fold_pins,
    pinned_block,
)
from compaction_app.engine.retention.facts import FactKind, ProbeFact
from compaction_app.engine.retention.score import carried_facts
from compaction_app.engine.vocabulary import PinMode
from compaction_app.limits import session_pin_budget
from compaction_app.models import TOKENS_FREED, Compaction
from sessions_app.compactions import rolled_up
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.locks import lock_session
from sessions_app.rollout.services import NewLine, append_rollout_lines, counter_for


def retention_fields(outcome: CompactionOutcome, *, flag_below: float | None) -> dict[str, Any]:
    score = outcome.retention
    probe = outcome.probe_retention
    reasons = []
    if score is not None:
        lost = [f.text for f in score.forgotten if f.kind is FactKind.PIN]
        if lost:
            # Named, not counted (issue 47 item 9): the operator sees which pin to check in the summary.
            named = ", ".join(f"“{' '.join(text.split())[:60]}”" for text in lost)
            reasons.append(f"lost pin{'s' if len(lost) > 1 else ''} {named}")
        if flag_below is not None and score.score is not None and score.score < flag_below:  # opaque: None
            reasons.append(f"retention {score.score:.0%} below {flag_below:.0%}")
    retry = outcome.retention_retry
    if retry is not None:
        if retry.get("error"):
            reasons.append(f"retry with the retry prompt failed: {retry['error']}"[:120])
        else:
            reasons.append(f"retried with the retry prompt: {retry['score_before']:.0%} → "
                           f"{(retry['score_after'] or 0):.0%}, kept the {retry['kept']} summary")
    return {
        "retention": score.to_dict() if score is not None else None,
        "probe_retention": probe.to_dict() if probe is not None else None,
        "retention_score": score.score if score is not None else None,
        "call_tokens": outcome.call_tokens,
        "probe_tokens": probe.tokens_spent if probe is not None else 0,
        "flagged": "; ".join(reasons)[:200],
    }


def session_carried_facts(*, session_id: int) -> list[ProbeFact]:
    """The facts the session's newest installed compaction still held (the next one is scored on them too)."""
    latest = (Compaction.objects.filter(session_id=session_id, rolled_back=False)
              .order_by("-rollout_seq").values_list("retention", flat=True).first())
    return carried_facts(latest)


def session_pins(*, session_id: int) -> list[Pin]:
    """The pins in force: a fold over the session's pin lines (a handful per session, read once per compaction)."""
    payloads = RolloutLine.objects.filter(
        session_id=session_id, kind=p.EVENT_MSG, payload__type__in=PIN_EVENTS,
    ).order_by("seq").values_list("payload", flat=True)
    return fold_pins(list(payloads))


def pin_usage(*, session: Session) -> dict[str, Any]:
    """The pins' tokens and their budget (what the pins card and a refusal show)."""
    budget, source = session_pin_budget(provider=session.provider, policy=session.policy)
    pins = session_pins(session_id=session.pk)
    used = counter_for(session).count_item(pinned_block(pins)) if pins else 0
    return {"used": used, "budget": budget, "source": source}


def _block_line(session: Session, pins: list[Pin]) -> list[NewLine]:
    """The pinned block as a history item, so the change reaches the model at its next request (reinject mode;
    check_only never shows pins to the model)."""
    if session.policy.pin_mode != PinMode.REINJECT:
        return []
    return [NewLine(p.RESPONSE_ITEM, pinned_block(pins))]


def do_add_pin(*, session: Session, kind: str, text: str, actor=None) -> Pin:
    """Pin a constraint, decision, file or fact: a `pin_added` line and, in reinject mode, the new pinned block in
    the history. Raises ValueError for an empty text or an unknown kind, PinBudgetExceeded (a ValueError, with the
    figures) when the pins would pass their token budget."""
    pin = Pin(pin_id=uuid.uuid4().hex[:12], kind=kind, text=text)
    with transaction.atomic():
        # One pin at a time per session: two concurrent pins cannot both fit in the budget's last tokens.
        locked = lock_session(session_id=session.pk, with_config=True)
        pins = session_pins(session_id=session.pk)
        budget, source = session_pin_budget(provider=locked.provider, policy=locked.policy)
        check_budget(pins, pin, count=counter_for(locked).count_item, budget=budget, source=source)
        append_rollout_lines(session=locked, lines=[
            NewLine(p.EVENT_MSG, {"type": PIN_ADDED, "pin": pin.to_dict()}), *_block_line(locked, [*pins, pin]),
        ], actor=actor)
    return pin


def do_remove_pin(*, session: Session, pin_id: str, actor=None) -> None:
    """Unpin: a `pin_removed` line and, in reinject mode, the pinned block without it (the model stops seeing it
    at its next request; the next compaction keeps no older block). Raises KeyError when there is no such pin."""
    with transaction.atomic():
        locked = lock_session(session_id=session.pk, with_config=True)
        pins = session_pins(session_id=session.pk)
        if pin_id not in {pin.pin_id for pin in pins}:
            raise KeyError(pin_id)
        rest = [pin for pin in pins if pin.pin_id != pin_id]
        append_rollout_lines(session=locked, lines=[
            NewLine(p.EVENT_MSG, {"type": PIN_REMOVED, "pin_id": pin_id}), *_block_line(locked, rest),
        ], actor=actor)


def retention_rollup(*, by: str, since=None, exact: bool = False) -> list[dict[str, Any]]:
    """Retention and cost per strategy / policy / model / day (`by`): compactions, mean retention score, tokens
    freed, tokens spent on compaction calls and probes, re-read tax, flagged count. The policy and model are the
    ones each compaction was made under. Over all time from the roll-up kept as compactions are written (issue 34);
    over a period (or `exact`) aggregated in the database from the compactions."""
    if since is None and not exact:
        return rolled_up.retention_rollup(by=by)
    field = {"strategy": "strategy", "policy": "policy__name", "model": "model", "day": "day"}[by]
    rows = Compaction.objects.filter(rolled_back=False)
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if by == "day":
        rows = rows.annotate(day=TruncDate("created_at"))
    return list(
        rows.values(key=F(field)).annotate(
            compactions=Count("pk"),
            retention=Avg("retention_score"),
            freed=Sum(TOKENS_FREED),
            spent=Sum("call_tokens"),
            probes=Sum("probe_tokens"),
            reread=Sum("reread_tokens"),
            flagged=Count("pk", filter=~Q(flagged="")),
        ).order_by("key")
    )
