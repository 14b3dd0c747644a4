"""Live pages for what a follower in another process writes, on the embedded default (issue 30).

`manage.py follow_rollouts` beside the dashboard writes to the same database, but on the in-memory channel layer
its live events stay in its own process. The dashboard therefore looks at the database itself: every
POLL_SECONDS it reads the followed files' rows changed lately (CodexSource.updated_at, indexed; the follower
stamps it with every batch of lines it stores) and publishes one lines event for each session whose newest seq
moved, as the append would have (the first and the newest of the new lines, with the session's summary). A
page updates within POLL_SECONDS plus its own render. With Redis (`REDIS_URL`), followers publish to every
dashboard themselves and this watcher does not run.

An event this process already sent (its own embedded follower) is sent again at most once: pages drop a seq they
have rendered.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.db import close_old_connections
from django.utils import timezone

from sessions_app.models import CodexSource, RolloutLine, Session
from sessions_app.rollout import projection as p
from sessions_app.rollout.events import publish_lines
from sessions_app.rollout.lease import IMPORTING_SOURCE
from sessions_app.rollout.selectors import session_summary

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5
# Rows stamped this long before a look are read again: a follower's transaction may commit after the look that
# followed its timestamp.
MARGIN = timedelta(seconds=10)


class FollowedWrites:
    """What the followed sessions' newest seqs were at the last look; `poll` publishes the ones that moved."""

    def __init__(self) -> None:
        self._last_seq: dict[int, int] = {}
        self._since = None

    def poll(self) -> list[int]:
        """Look once; returns the ids of the sessions an event was published for."""
        now = timezone.now()
        first = self._since is None
        since = (now if first else self._since) - MARGIN
        self._since = now
        rows = (CodexSource.objects.filter(updated_at__gte=since)
                .exclude(session__source=IMPORTING_SOURCE)
                .values_list("session_id", "session__last_seq"))
        published = []
        for session_id, last_seq in rows:
            before = self._last_seq.get(session_id)
            self._last_seq[session_id] = last_seq
            if first or before == last_seq:
                continue
            if _publish(session_id, after_seq=before or 0):
                published.append(session_id)
        return published


def _publish(session_id: int, *, after_seq: int) -> bool:
    session = Session.objects.select_related("provider", "policy").filter(pk=session_id).first()
    if session is None:
        return False
    new = RolloutLine.objects.filter(session_id=session_id, seq__gt=after_seq).values_list("seq", "kind", "payload__type")
    ends = {x[0]: x for x in (new.order_by("seq").first(), new.order_by("-seq").first()) if x is not None}
    if not ends:
        return False
    lines = [(seq, kind, event_type if kind == p.EVENT_MSG else None)
             for seq, kind, event_type in (ends[k] for k in sorted(ends))]
    publish_lines(session_id=session_id, summary=session_summary(session=session), lines=lines)
    return True


def watch(stop: threading.Event, *, poll_seconds: float = POLL_SECONDS, writes: FollowedWrites | None = None) -> None:
    """Poll until `stop` is set (a daemon thread of the dashboard)."""
    writes = writes or FollowedWrites()
    failing = False
    while not stop.wait(poll_seconds):
        try:
            close_old_connections()
            writes.poll()
        except Exception:  # a database hiccup must not end live pages for good
            if not failing:  # once per outage, not twice a second while it lasts
                logger.exception("follow: looking for a follower's writes failed; retrying quietly")
            failing = True
        else:
            if failing:
                logger.warning("follow: looking for a follower's writes works again")
            failing = False
    close_old_connections()


_started: threading.Event | None = None
_lock = threading.Lock()


def start_from_settings() -> threading.Event | None:
    """Start the watcher in the dashboard when the channel layer is in-memory (the embedded default); returns the
    event that stops it, or None when it is not needed."""
    global _started
    from django.conf import settings

    backend = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
    if not backend.endswith("InMemoryChannelLayer"):
        return None
    with _lock:
        if _started is None:
            _started = threading.Event()
            threading.Thread(target=watch, args=(_started,), name="compactweb-followed-writes", daemon=True).start()
    return _started


class StartOnFirstSocket:
    """ASGI middleware: start the watcher when the first page socket connects, since only live pages need it.

    Not at import time: a process that imports the ASGI application without serving pages (a test run, a shell)
    would otherwise poll the database for nobody."""

    def __init__(self, app) -> None:
        self.app = app
        self._started = False

    async def __call__(self, scope, receive, send):
        if not self._started:
            self._started = True
            start_from_settings()
        return await self.app(scope, receive, send)
