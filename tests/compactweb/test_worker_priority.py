"""A worker process lowers itself to its start's niceness + COMPACTWEB_WORKER_NICE once, whichever signal comes
first (compactweb/worker_priority.py, issue 42): a solo worker's main process at ready and again after its first
task, or a pool process forked after its main process was lowered, is not lowered twice."""

from __future__ import annotations

import os

from compactweb import worker_priority


def fake_priority(monkeypatch, start: int) -> dict[str, int]:
    current = {"nice": start}
    monkeypatch.setattr(os, "getpriority", lambda which, who: current["nice"])
    monkeypatch.setattr(os, "setpriority", lambda which, who, value: current.update(nice=value))
    monkeypatch.setattr(worker_priority, "_started_at", None)
    return current


def test_a_process_is_lowered_once_from_where_the_worker_started(monkeypatch):
    current = fake_priority(monkeypatch, start=5)
    worker_priority.remember_start_priority()

    assert worker_priority.lower_this_process(10) is True
    assert current["nice"] == 15
    assert worker_priority.lower_this_process(10) is False  # the same process again (a solo worker's first task)
    assert current["nice"] == 15


def test_a_pool_process_forked_from_a_lowered_main_process_stays_where_it_is(monkeypatch):
    current = fake_priority(monkeypatch, start=5)
    worker_priority.remember_start_priority()
    current["nice"] = 15  # forked after the main process lowered itself: inherited

    assert worker_priority.lower_this_process(10) is False
    assert current["nice"] == 15


def test_lowering_stops_at_19(monkeypatch):
    current = fake_priority(monkeypatch, start=12)
    worker_priority.remember_start_priority()

    assert worker_priority.lower_this_process(10) is True
    assert current["nice"] == 19


def test_the_first_task_lowers_a_pool_process_only_with_a_niceness_configured(monkeypatch):
    current = fake_priority(monkeypatch, start=0)
    worker_priority.remember_start_priority()
    monkeypatch.setenv(worker_priority.NICE_ENV, "0")
    worker_priority.lower_after_first_task()
    assert current["nice"] == 0

    monkeypatch.setenv(worker_priority.NICE_ENV, "10")
    worker_priority.lower_after_first_task()
    assert current["nice"] == 10
