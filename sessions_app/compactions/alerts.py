"""Storm, loop, re-read and failure-streak alerts: the Django side of compaction_app/engine/alerts.py.

Fed at three moments, never by scanning history per turn:
- `record_compaction` right after a compaction is installed: the session's watch restarts with what it dropped;
  storms are counted from compaction times (indexed);
- `record_attempt_failed` after a failed attempt: the failure streak;
- `record_turn` after every turn: one row read (the watch); the turn's own items are read only while the watch is
  active, and the re-read tax is added to the compaction that dropped the items.
Each alert is a row linked to its compactions / attempts, is sent to the enabled `alert` hooks (callables or
webhooks through the hook runner; webhook targets must pass the deployment's outbound rule) in the background,
and pauses the simulated session when the settings say so for its kind.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync
from celery import shared_task
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import BigIntegerField, CharField, F, Q, Value
from django.dispatch import Signal
from django.utils import timezone

from compaction_app import records
from compaction_app.audit import record_audit
from compaction_app.engine import alerts as rules
from compaction_app.engine.events import EventLog
from compaction_app.engine.hooks import HookRunner
from compaction_app.engine.items import Item
from compaction_app.engine.retention.facts import left_items
from compaction_app.engine.strategies.masking import is_masked
from compaction_app.engine.vocabulary import HookEvent, HookKind
from compaction_app.limits import auto_compact_limit
from compaction_app.models import (
    Alert,
    AlertSettings,
    AlertSilence,
    AuditEntry,
    Compaction,
    CompactionAttempt,
    Hook,
    SessionWatch,
)
from compaction_app.validators import validate_outbound_url
from compactweb import background, statements
from compactweb.domain_errors import Forbidden
from compactweb.roles import SUPPORT, has_role
from sessions_app.compactions import usage_lines
from sessions_app.compactions.settings_builder import hook_runner_limits, hook_specs
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import events
from sessions_app.rollout.lease import READ_ONLY_SOURCES
from sessions_app.rollout.projection import RESPONSE_ITEM
from sessions_app.rollout.services import append_rollout_lines

logger = logging.getLogger(__name__)


def thresholds() -> rules.Thresholds:
    s = AlertSettings.current()
    return rules.Thresholds(
        storm_count=s.storm_count, storm_minutes=s.storm_minutes, fleet_storm_count=s.fleet_storm_count,
        fleet_storm_minutes=s.fleet_storm_minutes, fleet_storm_per_session=s.fleet_storm_per_session,
        loop_turns=s.loop_turns, reread_turns=s.reread_turns,
        reread_min_calls=s.reread_min_calls, reread_min_share=s.reread_min_share, failure_streak=s.failure_streak,
        pause_on=frozenset(s.pause_on or []),
    )


def _watch(session_id: int) -> tuple[SessionWatch, rules.Watch]:
    row, _ = SessionWatch.objects.select_for_update().get_or_create(session_id=session_id)
    return row, rules.Watch.from_json(row.state)


def _save(row: SessionWatch, watch: rules.Watch) -> None:
    row.state = watch.to_json()
    row.save(update_fields=["state"])


def record_compaction(*, compaction: Compaction, before: list[Item], after: list[Item]) -> list[Alert]:
    """After an install (same transaction): restart the watch, count storms."""
    limits = thresholds()
    masked = {i.get("call_id") for i in after if is_masked(i)}
    dropped = rules.dropped_contents(left_items(before, after), masked, after, before)
    row, watch = _watch(compaction.session_id)
    watch = rules.on_compaction(watch, compaction_id=compaction.pk, thresholds=limits,
                                dropped={k: label for k, (label, _) in dropped.items()},
                                digests={k: d for k, (_, d) in dropped.items() if d},
                                after_seq=compaction.rollout_seq,
                                freed=compaction.tokens_before - compaction.tokens_after)
    watch, raised = rules.on_attempt(watch, attempt_id=0, failed=False, thresholds=limits)
    _save(row, watch)
    now = timezone.now()
    # History imported after the fact happened before it was seen: never part of a live storm (issue 44).
    recent = list(Compaction.objects.filter(
        session_id=compaction.session_id, created_at__gte=now - timedelta(minutes=limits.storm_minutes),
        history=False,
    ).order_by("pk").values_list("pk", flat=True))
    fleet_since = now - timedelta(minutes=limits.fleet_storm_minutes)
    # Relative to the fleet: a 200-session fleet compacts more than a 5-session one without a storm.
    active = Session.objects.filter(updated_at__gte=fleet_since).count()
    fleet_threshold = limits.fleet_storm_threshold(active)
    fleet_recent = Compaction.objects.filter(created_at__gte=fleet_since, history=False)
    # The alert links the first compactions past the threshold (a storm's evidence, bounded) and counts them all.
    fleet = list(fleet_recent.order_by("pk").values_list("pk", flat=True)[: fleet_threshold + 1])
    fleet_total = fleet_recent.count() if len(fleet) > fleet_threshold else len(fleet)
    fleet_alert = rules.storm(compaction_ids=fleet, count=fleet_threshold, minutes=limits.fleet_storm_minutes,
                              fleet=True, total=fleet_total)
    if fleet_alert is not None:
        fleet_alert.detail.update(active_sessions=active, threshold=fleet_threshold)
    found = [a for a in (
        rules.storm(compaction_ids=recent, count=limits.storm_count, minutes=limits.storm_minutes), fleet_alert,
    ) if a is not None]
    # One storm alert per storm: a storm still open is brought up to date at every raise (`_raise`: its count and
    # message follow the compactions); one acknowledged within the window is not raised again.
    found = [a for a in found if not _acknowledged_recently(
        a.kind, None if a.kind is rules.AlertKind.FLEET_STORM else compaction.session_id, minutes=limits.storm_minutes)]
    return _raise(found, session_id=compaction.session_id, limits=limits)


def _acknowledged_recently(kind: rules.AlertKind, session_id: int | None, *, minutes: int) -> bool:
    """Whether the storm was alerted within the window and the operator acknowledged it (and no alert of it is
    open, which `_raise` would update)."""
    now = timezone.now()
    recent = Alert.objects.filter(kind=kind.value, session_id=session_id, created_at__gte=now - timedelta(minutes=minutes))
    open_ = Alert.objects.filter(kind=kind.value, session_id=session_id, acknowledged_at__isnull=True,
                                 last_at__gte=now - timedelta(minutes=GROUP_MINUTES))
    return recent.exists() and not open_.exists()


def record_attempt_failed(*, session_id: int, attempt_id: int) -> list[Alert]:
    limits = thresholds()
    with transaction.atomic():
        row, watch = _watch(session_id)
        watch, found = rules.on_attempt(watch, attempt_id=attempt_id, failed=True, thresholds=limits)
        _save(row, watch)
        return _raise(found, session_id=session_id, limits=limits)


def _watch_state(session_id: int) -> dict[str, Any] | None:
    """The session's watch state, or None without a watch: a statement written once (compactweb.statements), since
    every turn runs it and the ORM's query building cost about twenty times the query."""
    found = _WATCH_STATE.values(where=(session_id,))
    return None if found is None else found[0]


_WATCH_STATE = statements.Select(SessionWatch, columns=("state",), where=("session",))


def record_turn(*, session_id: int, first_seq: int, last_seq: int) -> list[Alert]:
    """After a turn: feed the turn's items (only while the watch is active). O(items of the turn)."""
    # Most turns find no watch or an idle one: a plain read answers that without a write transaction (on SQLite an
    # IMMEDIATE transaction takes the database's write lock). A watch turns active only with a compaction, which
    # needs the session's lease the turn holds, so the locked read below sees what this one saw.
    state = _watch_state(session_id)
    if state is None or not first_seq or rules.is_idle(rules.Watch.from_json(state)):
        return []
    with transaction.atomic():
        row = SessionWatch.objects.select_for_update().filter(session_id=session_id).first()
        if row is None:
            return []
        watch = rules.Watch.from_json(row.state)
        if rules.is_idle(watch) or not first_seq:
            return []
        limits = thresholds()
        session = Session.objects.select_related("provider", "policy").get(pk=session_id)
        lines = list(RolloutLine.objects.filter(
            session_id=session_id, kind=RESPONSE_ITEM, seq__gte=max(first_seq, watch.after_seq + 1),
            seq__lte=last_seq,
        ).order_by("seq").values_list("payload", "tokens"))
        before_tax = watch.reread_tokens
        watch, found = rules.on_turn(
            watch, items=[p for p, _ in lines], item_tokens=[t for _, t in lines],
            tokens_in_window=session.tokens_in_window,
            limit=auto_compact_limit(provider=session.provider, policy=session.policy), thresholds=limits,
        )
        _save(row, watch)
        if watch.reread_tokens != before_tax and watch.compaction_id:
            tax = watch.reread_tokens - before_tax
            records.add_reread_tokens(compaction_id=watch.compaction_id, tokens=tax)
            _write_reread(session, compaction_id=watch.compaction_id, tokens=tax)
        return _raise(found, session_id=session_id, limits=limits)


def _write_reread(session: Session, *, compaction_id: int, tokens: int) -> None:
    """The re-read tax in the rollout too (usage_lines.REREAD_USAGE), so an export and re-import keeps it. Not in a
    followed session's rollout: that is the file's, read back as Codex wrote it."""
    if session.source in READ_ONLY_SOURCES:
        return
    compaction = Compaction.objects.filter(pk=compaction_id).values("window_id", "window_number").first()
    if compaction is None:
        return
    append_rollout_lines(session=session, lines=[usage_lines.reread_line(
        window_id=compaction["window_id"], window_number=compaction["window_number"], tokens=tokens)])


# Repeats of one cause (same rule, same session) within this many minutes of its last raise, while the alert is
# not acknowledged, are counted on the open alert instead of raising another.
GROUP_MINUTES = 60


def silence_scope(silence: AlertSilence) -> Q:
    """The one definition of what a snooze or silence covers, as a filter on alerts (issue 42): a rule fleet-wide
    covers that rule everywhere, fleet alerts included; every rule of a session (blank kind), that session's
    alerts; a rule in one session, just those. The raise (`is_silenced`), the live card and the alerts page and
    API (`_silenced`) all read it."""
    scope = Q()
    if silence.kind:
        scope &= Q(kind=silence.kind)
    if silence.session_id is not None:
        scope &= Q(session_id=silence.session_id)
    return scope


def is_silenced(*, kind: str, session_id: int | None, now=None) -> bool:
    """Whether an operator's snooze or silence in force covers an alert of this rule in this session (None: a
    fleet alert), not raised yet: the silences' scopes (`silence_scope`) checked against its values."""
    silences = active_silences(now=now)
    if not silences:
        return False
    covered = Q(pk__in=[])
    for silence in silences:
        covered |= silence_scope(silence)
    return covered.check({"pk": Value(0, output_field=BigIntegerField()),
                          "kind": Value(kind, output_field=CharField()),
                          # 0, never a row's id, for a fleet alert: Q.check takes a NULL comparison as a pass.
                          "session_id": Value(session_id or 0, output_field=BigIntegerField())})


def _open_alert(kind: str, session_id: int | None, now) -> Alert | None:
    return (Alert.objects.select_for_update().filter(
        kind=kind, session_id=session_id, acknowledged_at__isnull=True,
        last_at__gte=now - timedelta(minutes=GROUP_MINUTES)).order_by("-pk").first())


def _raise(found: list[rules.Alert], *, session_id: int, limits: rules.Thresholds) -> list[Alert]:
    rows = []
    now = timezone.now()
    for alert in found:
        fleet = alert.kind is rules.AlertKind.FLEET_STORM
        owner = None if fleet else session_id
        if is_silenced(kind=alert.kind.value, session_id=owner, now=now):
            continue
        row = _open_alert(alert.kind.value, owner, now)
        if row is not None:
            # The same cause again: one alert that counts, its message and links brought up to date.
            Alert.objects.filter(pk=row.pk).update(count=F("count") + 1, last_at=now, message=alert.message,
                                                   detail=alert.detail)
            row.refresh_from_db()
        else:
            row = Alert.objects.create(kind=alert.kind.value, session_id=owner, message=alert.message,
                                       detail=alert.detail, last_at=now)
        row.compactions.add(*Compaction.objects.filter(pk__in=alert.compaction_ids))
        if alert.attempt_ids:
            row.attempts.add(*CompactionAttempt.objects.filter(pk__in=alert.attempt_ids))
        if limits.pauses(alert.kind) and not fleet:
            row.paused = _pause(session_id) or row.paused
            row.save(update_fields=["paused"])
        rows.append(row)
        transaction.on_commit(lambda row=row: publish_alert(alert=row))
        if row.count > 1:
            continue  # hooks hear of a cause once, when it is first raised
        payload = {"hook_event_name": "Alert", "alert_id": row.pk, "kind": row.kind, "message": row.message,
                   "session_id": row.session_id, "compaction_ids": list(alert.compaction_ids),
                   "attempt_ids": list(alert.attempt_ids), "paused": row.paused, "detail": alert.detail}
        transaction.on_commit(lambda payload=payload: _notify(payload))
    return rows


# Pausing the simulator run behind a session belongs to the fleet, a floor above this one: the fleet connects a
# receiver (sessions_app.apps: fleet.runtime.pause_for_alert) that returns True when it paused a run.
pause_requested = Signal()


def _pause(session_id: int) -> bool:
    return any(paused for _receiver, paused in pause_requested.send(sender=Alert, session_id=session_id))


def allowed_alert_hooks() -> list:
    """The enabled `alert` hooks whose webhook target passes the outbound rule (a refused one is logged)."""
    specs = []
    for spec in hook_specs(hooks=list(Hook.objects.filter(event=Hook.Event.ALERT, enabled=True))):
        if spec.kind is HookKind.WEBHOOK:
            try:
                validate_outbound_url(spec.target)
            except ValidationError as exc:
                logger.warning("alert hook %s not called: %s", spec.name, " ".join(exc.messages))
                continue
        specs.append(spec)
    return specs


def _notify(payload: dict[str, Any]) -> None:
    specs = allowed_alert_hooks()
    if specs:
        background.submit(send_alert_task, payload=payload)


def send_alert(payload: dict[str, Any]) -> list:
    """Run the alert hooks (failures are recorded by the runner and logged, never raised)."""
    runner = HookRunner(allowed_alert_hooks(), **hook_runner_limits())
    result = async_to_sync(runner.run)(HookEvent.ALERT, {**payload, "trigger": "auto"}, EventLog(None))
    for record in result.records:
        if record.error:
            logger.warning("alert hook %s failed: %s", record.name, record.error)
    return result.records


@shared_task(name="sessions_app.compactions.alerts.send_alert_task")
def send_alert_task(*, payload: dict) -> int:
    """Send one alert to the enabled alert hooks; returns how many ran."""
    return len(send_alert(payload))


def recent_alerts(*, limit: int = 10, session_id: int | None = None) -> list[Alert]:
    """The newest open (not acknowledged) alerts with their sessions, compactions and attempts (four queries);
    of one session when given (with the fleet's storms)."""
    rows = Alert.objects.filter(acknowledged_at__isnull=True)
    if session_id is not None:
        rows = rows.filter(Q(session_id=session_id) | Q(session__isnull=True))
    # What an operator snoozed or silenced leaves the live card (the alerts page lists it under "snoozed").
    rows = rows.exclude(_silenced())
    return list(rows.select_related("session", "acknowledged_by").prefetch_related("compactions", "attempts")
                .order_by("-last_at", "-pk")[:limit])


# Sent (after commit) when an alert was raised, grew or was acknowledged: the boundary alert delivery listens on
# (sessions_app.apps: compactions.alert_delivery.on_alert_changed), so the rules know nothing of destinations.
alert_changed = Signal()


def publish_alert(*, alert: Alert) -> None:
    """Tell the live pages (fleet board, the session's page) that this alert was raised, grew or was acknowledged;
    their consumers re-render the alerts list (sessions_app.live); and tell alert delivery."""
    events.publish_alert_event(session_id=alert.session_id, alert_id=alert.pk)
    alert_changed.send_robust(sender=Alert, alert=alert)  # a failing destination never fails the alert


def do_acknowledge_alert(*, alert: Alert, actor) -> Alert:
    """Acknowledge an alert (who and when are kept); a new raise of its cause opens a new alert."""
    Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(acknowledged_at=timezone.now(),
                                                                          acknowledged_by=actor)
    alert.refresh_from_db()
    transaction.on_commit(lambda: publish_alert(alert=alert))
    return alert


# Who may do what with silences (docs/alerts.md, "Acknowledge, snooze, silence"): an operator silences within one
# session (a rule there, or every rule of it); a rule for the whole fleet is the support role's, since it hides
# every session's alerts from every operator. A silence is lifted by whoever set it or by the support role.
FLEET_SILENCE_ROLE = SUPPORT


class SilenceNotAllowed(Forbidden):
    """The silence's scope, or lifting another user's silence, is not the actor's role."""


def may_silence_fleet(actor) -> bool:
    return has_role(actor, FLEET_SILENCE_ROLE)


def may_lift(actor, silence: AlertSilence) -> bool:
    return (silence.created_by_id is not None and silence.created_by_id == getattr(actor, "pk", None)) or has_role(
        actor, FLEET_SILENCE_ROLE)


def do_silence_alerts(*, kind: str, session_id: int | None, minutes: int | None, actor,
                      reason: str = "") -> AlertSilence:
    """Snooze (for `minutes`) or silence (minutes None: until lifted) one rule, one session, or one rule of one
    session, and audit it. Raises ValueError without a scope, SilenceNotAllowed for a fleet-wide silence by an
    actor without the support role."""
    if not kind and session_id is None:
        raise ValueError("silence a rule, a session, or a rule in a session")
    if session_id is None and not may_silence_fleet(actor):
        raise SilenceNotAllowed(f"silencing a rule for every session needs the {FLEET_SILENCE_ROLE} role; "
                                "silence it in one session instead")
    until = timezone.now() + timedelta(minutes=minutes) if minutes else None
    with transaction.atomic():
        silence = AlertSilence.objects.create(kind=kind, session_id=session_id, until=until, created_by=actor,
                                              reason=reason[:200])
        record_audit(action=AuditEntry.Action.ALERT_SILENCE, actor=actor, reason=silence.reason,
                     detail=_silence_detail(silence))
    transaction.on_commit(lambda: events.publish_alert_event(session_id=session_id, alert_id=0))
    return silence


def do_lift_silence(*, silence: AlertSilence, actor) -> None:
    """Lift a snooze or silence, and audit it. Raises SilenceNotAllowed when `actor` neither set it nor has the
    support role."""
    if not may_lift(actor, silence):
        raise SilenceNotAllowed(f"this silence was set by {_setter(silence)}: only they or the "
                                f"{FLEET_SILENCE_ROLE} role may lift it")
    session_id = silence.session_id
    with transaction.atomic():
        record_audit(action=AuditEntry.Action.ALERT_SILENCE_LIFT, actor=actor, detail=_silence_detail(silence))
        silence.delete()
    transaction.on_commit(lambda: events.publish_alert_event(session_id=session_id, alert_id=0))


def _setter(silence: AlertSilence) -> str:
    return silence.created_by.get_username() if silence.created_by is not None else "a removed user"


def _silence_detail(silence: AlertSilence) -> dict[str, Any]:
    # The session by number, not as the entry's session: an audit entry protects its session from removal, and a
    # silence must not keep a session from retention.
    return {"silence": silence.pk, "kind": silence.kind, "session": silence.session_id,
            "until": silence.until.isoformat() if silence.until else None, "set_by": _setter(silence)}


def active_silences(*, now=None) -> list[AlertSilence]:
    now = now or timezone.now()
    return list(AlertSilence.objects.filter(Q(until__isnull=True) | Q(until__gt=now))
                .select_related("session", "created_by"))


def _silenced(*, now=None) -> Q:
    """The alerts an active snooze or silence covers (`silence_scope` of each); matches nothing when none is
    active."""
    covered = Q(pk__in=[])
    for silence in active_silences(now=now):
        covered |= silence_scope(silence)
    return covered


def alerts_filtered(*, kind: str | None = None, session_id: int | None = None, state: str | None = None,
                    since=None, limit: int = 100) -> list[Alert]:
    """Alerts for the alerts page and `GET /api/v1/alerts`: by rule, session, state (open, snoozed, acknowledged),
    time. A snoozed or silenced alert is not open."""
    rows = Alert.objects.all()
    if kind:
        rows = rows.filter(kind=kind)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    # open and snoozed part the unacknowledged alerts: the live card's count equals the page's open rows
    if state == "open":
        rows = rows.filter(acknowledged_at__isnull=True).exclude(_silenced())
    elif state == "snoozed":
        rows = rows.filter(_silenced(), acknowledged_at__isnull=True)
    elif state == "acknowledged":
        rows = rows.filter(acknowledged_at__isnull=False)
    if since is not None:
        rows = rows.filter(last_at__gte=since)
    return list(rows.select_related("session", "acknowledged_by").prefetch_related("compactions", "attempts")
                .order_by("-last_at", "-pk")[:limit])


def open_alerts():
    """The open alerts as the alerts page counts them: not acknowledged, not snoozed or silenced (/metrics'
    `compactweb_alerts_open`)."""
    return Alert.objects.filter(acknowledged_at__isnull=True).exclude(_silenced())
