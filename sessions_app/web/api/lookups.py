"""What an API request names, found or answered with 404 in the API's error shape: a `NotFound` domain error,
which the API's exception handler answers (compactweb.api_errors), with one message for every kind of row."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ObjectDoesNotExist

from compactweb.domain_errors import NotFound
from sessions_app.models import Session
from sessions_app.rollout import selectors

T = TypeVar("T")


def not_found(what: str, pk: object) -> NotFound:
    return NotFound(f"{what} {pk} does not exist")


def found(what: str, pk: object, get: Callable[[], T]) -> T:
    """What `get()` returns, or 404 when the row it reads does not exist."""
    try:
        return get()
    except ObjectDoesNotExist:
        raise not_found(what, pk) from None


def require_session(pk: int) -> None:
    """404 unless the session exists (for views that read only its rows)."""
    if not Session.objects.filter(pk=pk).exists():
        raise not_found("session", pk)


def session_or_404(pk: int) -> Session:
    """The session with its provider and policy (`selectors.get_session`), or 404."""
    return found("session", pk, lambda: selectors.get_session(session_id=pk))
