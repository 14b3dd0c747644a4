"""Sending one alert message to one destination (issue 45): a Slack-compatible or JSON webhook over HTTP, or email
through Django's email backend. A failure raises `SendFailed` with a short reason; retries are the caller's
(alert_delivery).

Webhook URLs pass the deployment's outbound rule again right before each send (a row saved under an older rule, or
a name that now resolves to a private address), redirects are not followed (a public URL must not bounce the
request to a private one), and the answer's body is never read: its status says enough. The JSON webhook's
signing secret, and the URL of a destination that names `url_env`, are read from the environment variables the
destination names, at the moment of sending.
"""

from __future__ import annotations

import os
import time

import httpx
from django.core.mail import EmailMessage, get_connection

from compaction_app.engine import alert_delivery as messages
from compaction_app.engine.reasons import short_reason
from compaction_app.models import AlertDestination
from compaction_app.validators import outbound_url_problem, secret_env_allowed


class SendFailed(Exception):
    """A send that did not reach the destination (or was refused by it); the message is the recorded reason."""


def send(destination: AlertDestination, payload: dict) -> None:
    """Send `payload` (made by `alert_delivery.make_payload` for this destination's kind)."""
    if destination.kind == AlertDestination.Kind.EMAIL:
        _send_email(destination, payload)
    else:
        _post(destination, payload)


def _post(destination: AlertDestination, payload: dict) -> None:
    url = _env_value("URL variable", destination.url_env) if destination.url_env else destination.url
    problem = outbound_url_problem(url)
    if problem:
        raise SendFailed(f"URL refused: {problem}")
    body = messages.body_bytes(payload)
    headers = {"Content-Type": "application/json", "User-Agent": "compactweb-alerts"}
    if destination.kind == AlertDestination.Kind.WEBHOOK:
        timestamp = str(int(time.time()))
        headers[messages.TIMESTAMP_HEADER] = timestamp
        secret = _env_value("signing secret variable", destination.secret_env).encode()
        headers[messages.SIGNATURE_HEADER] = messages.signature(secret, timestamp=timestamp, body=body)
    try:
        with httpx.Client(timeout=destination.timeout_seconds, follow_redirects=False) as client:
            with client.stream("POST", url, content=body, headers=headers) as response:
                status = response.status_code
    except httpx.TimeoutException as exc:
        raise SendFailed(f"timed out after {destination.timeout_seconds:g} s") from exc
    except httpx.HTTPError as exc:
        raise SendFailed(short_reason(f"{type(exc).__name__}: {exc}")) from exc
    if not 200 <= status < 300:
        raise SendFailed(f"answered HTTP {status}")


def _env_value(what: str, name: str) -> str:
    # The name was allowed when saved; the deployment's rule is asked again, as for a provider's key.
    if not name or not secret_env_allowed(name):
        raise SendFailed(f"{what} {name or '(none)'} is not an allowed secret variable")
    value = os.environ.get(name, "")
    if not value:
        raise SendFailed(f"{what} {name} is not set")
    return value


def _send_email(destination: AlertDestination, payload: dict) -> None:
    recipients = destination.recipient_list()
    if not recipients:
        raise SendFailed("no recipients")
    try:
        connection = get_connection(fail_silently=False, timeout=destination.timeout_seconds)
        EmailMessage(subject=payload["subject"], body=payload["body"], to=recipients,
                     connection=connection).send(fail_silently=False)
    except TimeoutError as exc:
        raise SendFailed(f"timed out after {destination.timeout_seconds:g} s") from exc
    except Exception as exc:  # smtplib and socket errors have no common base worth naming; all are a failed send
        raise SendFailed(short_reason(f"{type(exc).__name__}: {exc}")) from exc
