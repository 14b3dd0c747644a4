"""Which worker a session's steps go to (issue 34): the one that holds the session's caches, while it lives.

Each Celery worker consumes a queue of its own (Celery's `worker_direct`: `<node name>.dq2`) and, while it runs,
renews a heartbeat key in the broker's Redis that expires after HEARTBEAT_TTL_SECONDS (`Heartbeat`, started by
compactweb.celery when the worker is ready, removed when it shuts down). The dispatcher reads the live workers
(`Registry.live`) and picks a session's worker by rendezvous hashing (`rendezvous`): every worker scores the
session and the highest score wins, so adding or removing a worker moves only the sessions it wins or won.

With affinity off (COMPACTWEB_STEP_AFFINITY=0), no Redis broker, or no live worker known, steps go to the shared
queue as before. What happens to the steps a dead worker's queue still holds is the dispatcher's business
(sessions_app.fleet.affinity); this module only knows workers and queues.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from collections.abc import Iterable

from django.conf import settings

logger = logging.getLogger(__name__)

KEY_PREFIX = "compactweb:step-worker:"
MEMBERS_KEY = "compactweb:step-workers"
# A worker that stops renewing (killed, hung, cut off from Redis) counts as dead this long after its last renewal.
HEARTBEAT_TTL_SECONDS = float(os.environ.get("COMPACTWEB_WORKER_HEARTBEAT_TTL", "10"))
RENEWALS_PER_TTL = 4


def enabled() -> bool:
    """Whether steps are routed by session: the setting is on and the broker is a Redis server (the heartbeats
    live there)."""
    broker = settings.CELERY_BROKER_URL or ""
    return bool(settings.COMPACTWEB_STEP_AFFINITY) and broker.startswith(("redis://", "rediss://"))


@functools.lru_cache(maxsize=1024)
def queue_of(node: str):
    """The queue only worker `node` consumes: Celery's worker_direct queue (`<node>.dq2`, bound to the `C.dq2`
    exchange by the node's name), which every worker declares and reads when CELERY_WORKER_DIRECT is on."""
    from celery.utils.nodenames import worker_direct

    return worker_direct(node)


def _score(node: str, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{node}\0{key}".encode(), digest_size=8).digest(), "big")


def rendezvous(key: int | str, nodes: Iterable[str]) -> str | None:
    """The node that wins `key` (highest random weight); None when there is none. A node's win depends only on
    the key and that node, so removing a node moves only the keys it won, and adding one takes only keys it wins."""
    key = str(key)
    return max(nodes, key=lambda node: (_score(node, key), node), default=None)


class Registry:
    """The live workers, as heartbeat keys in the broker's Redis (a key per worker with a TTL, and a set of the
    names, so that reading them is one round trip and a worker whose key expired is known to be dead)."""

    def __init__(self, client=None) -> None:
        self._client = client

    @property
    def client(self):
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2,
                                                socket_connect_timeout=2)
        return self._client

    def beat(self, node: str, *, ttl: float = HEARTBEAT_TTL_SECONDS) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.set(KEY_PREFIX + node, "1", px=int(ttl * 1000))
        pipe.sadd(MEMBERS_KEY, node)
        pipe.execute()

    def forget(self, node: str) -> None:
        """A worker that stops cleanly: dead at once, not after its TTL."""
        pipe = self.client.pipeline(transaction=False)
        pipe.delete(KEY_PREFIX + node)
        pipe.srem(MEMBERS_KEY, node)
        pipe.execute()

    def live(self) -> list[str]:
        """The workers whose heartbeat has not expired, sorted; a name whose key expired leaves the set."""
        names = sorted(n.decode() if isinstance(n, bytes) else n for n in self.client.smembers(MEMBERS_KEY))
        if not names:
            return []
        alive = self.client.mget([KEY_PREFIX + n for n in names])
        dead = [n for n, beat in zip(names, alive, strict=True) if beat is None]
        if dead:
            self.client.srem(MEMBERS_KEY, *dead)
        return [n for n, beat in zip(names, alive, strict=True) if beat is not None]


class Heartbeat(threading.Thread):
    """Renews a worker's heartbeat key RENEWALS_PER_TTL times per TTL until stopped; a renewal that fails (Redis
    away) is logged and retried at the next one. Runs in the worker's main process: when that process dies the
    key expires."""

    def __init__(self, node: str, *, registry: Registry | None = None, ttl: float = HEARTBEAT_TTL_SECONDS) -> None:
        super().__init__(name="compactweb-worker-heartbeat", daemon=True)
        self.node = node
        self.registry = registry or Registry()
        self.ttl = ttl
        self._stopping = threading.Event()

    def run(self) -> None:
        failing = False
        while not self._stopping.is_set():
            try:
                self.registry.beat(self.node, ttl=self.ttl)
                failing = False
            except Exception:
                if not failing:
                    logger.exception("worker %s could not renew its heartbeat", self.node)
                failing = True
            self._stopping.wait(self.ttl / RENEWALS_PER_TTL)

    def stop(self) -> None:
        """Stop renewing and remove the key, so the dispatcher stops sending here and re-offers what it sent."""
        self._stopping.set()
        self.join(timeout=5)
        try:
            self.registry.forget(self.node)
        except Exception:
            logger.exception("worker %s could not remove its heartbeat (it expires by itself)", self.node)


_heartbeat: Heartbeat | None = None


def start_heartbeat(sender=None, **signal_kwargs) -> Heartbeat | None:
    """worker_ready: announce this worker (its node name) while it runs."""
    global _heartbeat
    node = getattr(sender, "hostname", None)
    if not enabled() or not node or _heartbeat is not None:
        return None
    _heartbeat = Heartbeat(node)
    _heartbeat.start()
    logger.info("worker %s takes its sessions' steps on queue %s", node, queue_of(node).name)
    return _heartbeat


def stop_heartbeat(**signal_kwargs) -> None:
    """worker_shutting_down (warm or cold): stop announcing this worker."""
    global _heartbeat
    if _heartbeat is not None:
        _heartbeat.stop()
        _heartbeat = None
