"""Run one call from many threads released at the same instant, each on its own database connection, as separate
workers would: the scale-out tests use it to race compactions and simulator steps for one session."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection

from sessions_app.models import Session
from sessions_app.rollout.events import close_thread_loop


class AtOnce:
    """`AtOnce(n, call).start()` starts the threads; `.join(timeout)` returns each call's result or exception."""

    def __init__(self, count: int, call: Callable[[], object]) -> None:
        self.call = call
        self.start_line = threading.Barrier(count, timeout=30)
        self.results: list[object] = [None] * count
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(count)]

    def _run(self, index: int) -> None:
        try:
            Session.objects.exists()  # open this thread's connection before the start line
            self.start_line.wait()
            self.results[index] = self.call()
        except BaseException as exc:  # every outcome is the caller's to assert
            self.results[index] = exc
        finally:
            close_thread_loop()  # a thread that published made a loop of its own: close it here, not in a GC
            connection.close()

    def start(self) -> AtOnce:
        for thread in self.threads:
            thread.start()
        return self

    def join(self, timeout: float) -> list[object]:
        for thread in self.threads:
            thread.join(timeout=timeout)
        assert not any(thread.is_alive() for thread in self.threads), f"a call did not finish within {timeout:g} s"
        return self.results
