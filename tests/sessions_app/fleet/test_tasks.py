"""sessions_app.fleet.tasks: what a worker does before its pool forks."""

from __future__ import annotations

from celery.signals import worker_init

from compaction_app.engine import tokens
from sessions_app.fleet import tasks


def test_a_worker_builds_the_default_token_counter_before_its_pool_forks_its_children():
    tokens.counter.cache_clear()
    tasks.warm_token_counter(sender=None)
    assert tokens.counter.cache_info().currsize == 1
    assert tokens.counter.cache_info().misses == 1
    tokens.counter("o200k_base")
    assert tokens.counter.cache_info().hits == 1  # the default the steps count with is the one built


def test_the_warm_up_runs_on_worker_init():
    assert any(key[0] == "compactweb-warm-token-counter" for key, _ in worker_init.receivers)
