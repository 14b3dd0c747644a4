"""Delivering alerts to the admin's destinations (issue 45, docs/alerts.md "Delivery"): which messages an alert's
change makes, their rows, the sends, retries with back-off and dead letters.

The one boundary with the alert rules: `alerts.alert_changed`, sent when an alert was raised, grew or was
acknowledged and its transaction committed. Each wanted message becomes an `AlertDelivery` row (made once; a
unique constraint keeps a message from being made twice) and is handed to the project's job runner
(`compactweb.background`: a Celery worker, or the in-process pool). A send first claims the row's attempt with one
conditional UPDATE, so a row is sent by one sender at a time however many schedulers and workers look at it; a
failed attempt is due again after `backoff_seconds`, and once `COMPACTWEB_ALERT_MAX_ATTEMPTS` are spent the row is
a dead letter (the admin's *Alert deliveries*, filtered by status). The scheduler's housekeeping and Celery beat
offer the due rows again (`retry_due`) and send the *resolved* message of a cause that stopped.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from compaction_app.engine import alert_delivery as messages
from compaction_app.engine.alert_delivery import AlertFacts, DeliveryEvent
from compaction_app.engine.reasons import short_reason
from compaction_app.models import Alert, AlertDelivery, AlertDestination
from compactweb import background
from sessions_app.compactions import alert_senders, alerts

logger = logging.getLogger(__name__)

Status = AlertDelivery.Status
# A claimed attempt that neither succeeded nor failed by then (its sender died) may be taken over.
CLAIM_GRACE_SECONDS = 60.0
# A cause that stopped is told resolved only while this recent: an old alert left open is not announced anew.
RESOLVE_LOOKBACK = timedelta(days=1)
SWEEP_BATCH = 100


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def facts_of(alert: Alert) -> AlertFacts:
    base = getattr(settings, "COMPACTWEB_PUBLIC_URL", "").rstrip("/")
    path = (reverse("session_detail", args=[alert.session_id]) if alert.session_id is not None
            else reverse("alerts") + f"?kind={alert.kind}")
    return AlertFacts(
        id=alert.pk, kind=alert.kind, severity=messages.severity_of(alert.kind).value, message=alert.message,
        session_id=alert.session_id, count=alert.count,
        created_at=alert.created_at.isoformat() if alert.created_at else None,
        last_at=alert.last_at.isoformat() if alert.last_at else None,
        acknowledged_at=alert.acknowledged_at.isoformat() if alert.acknowledged_at else None,
        acknowledged_by=alert.acknowledged_by.get_username() if alert.acknowledged_by_id else None,
        url=f"{base}{path}" if base else "",
    )


def make_payload(kind: str, event: DeliveryEvent, facts: AlertFacts) -> dict:
    """The message for a destination of `kind`, stored on the delivery row."""
    if kind == AlertDestination.Kind.SLACK:
        return messages.slack_payload(event, facts)
    if kind == AlertDestination.Kind.WEBHOOK:
        return messages.webhook_payload(event, facts)
    subject, body = messages.email_message(event, facts)
    return {"subject": subject, "body": body}


def on_alert_changed(sender=None, *, alert: Alert, **kwargs) -> list[AlertDelivery]:
    """alerts.alert_changed receiver (after commit): make and send the message this change is worth."""
    event = messages.event_for(count=alert.count, acknowledged=alert.acknowledged_at is not None)
    if event is None:
        return []
    return enqueue(alert, event)


def enqueue(alert: Alert, event: DeliveryEvent, *, destinations=None) -> list[AlertDelivery]:
    """One delivery row per wanted destination (none twice for the same message), each handed to a sender."""
    severity = messages.severity_of(alert.kind)
    if destinations is None:
        destinations = [d for d in AlertDestination.objects.filter(enabled=True)
                        if d.wants(kind=alert.kind, severity=severity)]
    if not destinations:
        return []
    facts = facts_of(alert)
    made = []
    now = timezone.now()
    for destination in destinations:
        try:
            with transaction.atomic():
                made.append(AlertDelivery.objects.create(
                    destination=destination, alert=alert, event=event.value, count=alert.count,
                    payload=make_payload(destination.kind, event, facts), next_attempt_at=now))
        except IntegrityError:
            continue  # this message was already made (an acknowledgement repeated, two sweeps at once)
    for delivery in made:
        _offer(delivery.pk, now=now)
    return made


def claim(delivery_id: int, *, now: datetime) -> int | None:
    """Take the next attempt of a due pending delivery: its number, or None when it is not due or another sender
    holds it. One conditional UPDATE, true for one caller."""
    row = AlertDelivery.objects.filter(pk=delivery_id).select_related("destination").first()
    if row is None or row.status != Status.PENDING or (row.next_attempt_at and row.next_attempt_at > now):
        return None
    lapse = now + timedelta(seconds=row.destination.timeout_seconds + CLAIM_GRACE_SECONDS)
    taken = AlertDelivery.objects.filter(pk=delivery_id, status=Status.PENDING, attempts=row.attempts).filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
    ).update(attempts=row.attempts + 1, next_attempt_at=lapse)
    return row.attempts + 1 if taken else None


def _offer(delivery_id: int, *, now: datetime) -> bool:
    attempt = claim(delivery_id, now=now)
    if attempt is None:
        return False
    background.submit(deliver_alert_task, delivery_id=delivery_id, attempt=attempt)
    return True


def deliver(delivery_id: int, *, attempt: int) -> str:
    """Run claimed attempt `attempt` of a delivery; returns the row's status after it."""
    row = AlertDelivery.objects.select_related("destination").filter(pk=delivery_id).first()
    if row is None or row.status != Status.PENDING or row.attempts != attempt:
        return row.status if row else "gone"
    try:
        alert_senders.send(row.destination, row.payload)
    except alert_senders.SendFailed as exc:
        return _failed(row, attempt=attempt, reason=str(exc))
    AlertDelivery.objects.filter(pk=row.pk, attempts=attempt, status=Status.PENDING).update(
        status=Status.SENT, sent_at=timezone.now(), next_attempt_at=None, last_error="")
    return Status.SENT


def _failed(row: AlertDelivery, *, attempt: int, reason: str) -> str:
    spent = attempt >= int(_setting("COMPACTWEB_ALERT_MAX_ATTEMPTS", 8))
    wait = messages.backoff_seconds(attempt, base=_setting("COMPACTWEB_ALERT_RETRY_SECONDS", 30.0),
                                    cap=_setting("COMPACTWEB_ALERT_RETRY_MAX_SECONDS", 1800.0))
    status = Status.DEAD if spent else Status.PENDING
    AlertDelivery.objects.filter(pk=row.pk, attempts=attempt, status=Status.PENDING).update(
        status=status, last_error=short_reason(reason, 300),
        next_attempt_at=None if spent else timezone.now() + timedelta(seconds=wait))
    log = logger.error if spent else logger.warning
    log("alert delivery %s to %s failed (attempt %s%s): %s", row.pk, row.destination.name, attempt,
        ", dead letter" if spent else f", again in {wait:g} s", reason)
    return status


@shared_task(name="sessions_app.compactions.alert_delivery.deliver_alert_task", ignore_result=True)
def deliver_alert_task(*, delivery_id: int, attempt: int) -> str:
    return deliver(delivery_id, attempt=attempt)


def _resolve_quiet_causes(now: datetime) -> int:
    """A *resolved* message for each open alert that was told raised and has not been raised again within the
    grouping window (its next raise would open a new alert): to the destinations its raise reached."""
    quiet_since = now - timedelta(minutes=alerts.GROUP_MINUTES)
    told = AlertDelivery.objects.filter(event=DeliveryEvent.RAISED.value, status=Status.SENT)
    resolved = AlertDelivery.objects.filter(event=DeliveryEvent.RESOLVED.value)
    quiet = (Alert.objects.filter(acknowledged_at__isnull=True, last_at__lt=quiet_since,
                                  last_at__gte=quiet_since - RESOLVE_LOOKBACK, pk__in=told.values("alert_id"))
             .exclude(pk__in=resolved.values("alert_id")).select_related("acknowledged_by")[:SWEEP_BATCH])
    made = 0
    for alert in quiet:
        destinations = list(AlertDestination.objects.filter(
            enabled=True, pk__in=told.filter(alert=alert).values("destination_id")))
        made += len(enqueue(alert, DeliveryEvent.RESOLVED, destinations=destinations))
    return made


def retry_due(*, now: datetime | None = None) -> int:
    """Offer again every pending delivery that is due (a failed attempt's back-off passed, or a claim lapsed), and
    tell resolved the causes that stopped. Returns how many attempts were handed to senders."""
    now = now or timezone.now()
    _resolve_quiet_causes(now)
    due = list(AlertDelivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now)
               .order_by("next_attempt_at").values_list("pk", flat=True)[:SWEEP_BATCH])
    return sum(_offer(pk, now=now) for pk in due)


@shared_task(name="sessions_app.compactions.alert_delivery.retry_due_task", ignore_result=True)
def retry_due_task() -> int:
    return retry_due()


# The housekeeping round comes every 2 s; the due rows are looked for at most this often per process.
CHECK_EVERY_SECONDS = 10.0
_checked = {"at": float("-inf")}
_check_lock = threading.Lock()


def retry_if_due(sender=None, *, clock=time.monotonic, **kwargs) -> bool:
    """housekeeping_done receiver: at most every CHECK_EVERY_SECONDS, hand the sweep to a worker (or the pool)
    when a destination exists. Returns whether it did."""
    with _check_lock:
        if clock() - _checked["at"] < CHECK_EVERY_SECONDS:
            return False
        _checked["at"] = clock()
    if not AlertDestination.objects.exists():
        return False
    background.submit(retry_due_task)
    return True


def do_send_test(destination: AlertDestination) -> AlertDelivery:
    """An admin's "send a test message": sent at once, in the request, and recorded (a failed test is a dead
    letter with its reason, not retried: the admin is looking at the answer)."""
    facts = AlertFacts(id=None, kind="test", severity=messages.Severity.INFO.value,
                       message=f"A test message from compactweb to the destination {destination.name!r}.",
                       session_id=None, count=1, created_at=timezone.now().isoformat(), last_at=None)
    row = AlertDelivery.objects.create(
        destination=destination, event=DeliveryEvent.TEST.value, attempts=1,
        payload=make_payload(destination.kind, DeliveryEvent.TEST, facts))
    try:
        alert_senders.send(destination, row.payload)
    except alert_senders.SendFailed as exc:
        row.status, row.last_error = Status.DEAD, short_reason(str(exc), 300)
    else:
        row.status, row.sent_at = Status.SENT, timezone.now()
    row.save(update_fields=["status", "last_error", "sent_at"])
    return row


def do_retry_dead(deliveries) -> int:
    """An admin's retry of dead letters: pending again with fresh attempts, offered at once. Tests are not
    retried (send a new one)."""
    now = timezone.now()
    ids = list(deliveries.filter(status=Status.DEAD, alert__isnull=False).values_list("pk", flat=True))
    reset = AlertDelivery.objects.filter(pk__in=ids, status=Status.DEAD).update(
        status=Status.PENDING, attempts=0, next_attempt_at=now, last_error="")
    transaction.on_commit(lambda: [_offer(pk, now=now) for pk in ids])
    return reset
