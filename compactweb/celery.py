"""The Celery app. With no CELERY_BROKER_URL, tasks run eagerly in-process (the embedded default)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")


def keep_workers_alive_when_redis_restarts() -> None:
    """Let a worker survive its Redis broker going away while a task runs (kombu 5.7's Redis channel).

    On a lost connection Celery closes the channel twice: once while collecting the connection, then again after
    detaching the transport. The first close reads the BRPOP still pending on the dead socket, fails on it and
    leaves the channel open; the second then tries to requeue the running (acks_late) tasks through the detached
    transport and raises AttributeError, which Celery treats as unrecoverable: the worker exits instead of
    reconnecting. Closing again right after the failed read (the read clears the pending BRPOP) finishes the
    first close while the transport is still attached. Idempotent."""
    from kombu.transport import redis as kombu_redis

    close = kombu_redis.Channel.close
    if getattr(close, "survives_a_failed_pending_read", False):
        return
    connection_errors = kombu_redis.get_redis_error_classes().connection_errors

    def close_past_a_failed_pending_read(channel) -> None:
        try:
            close(channel)
        except connection_errors:
            if channel.closed:
                raise
            close(channel)

    close_past_a_failed_pending_read.survives_a_failed_pending_read = True
    kombu_redis.Channel.close = close_past_a_failed_pending_read


keep_workers_alive_when_redis_restarts()

app = Celery("compactweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["sessions_app.compactions", "sessions_app.fleet", "sessions_app.jobs"])
