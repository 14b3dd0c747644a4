"""The one LRU map (compaction_app/engine/lru.py): bounded, least recently used out first, `get` a use and `peek`
not, `keeps` guarding an entry, safe across threads."""

from __future__ import annotations

import threading

from compaction_app.engine.lru import Lru, TtlLru


def test_beyond_its_size_the_least_recently_used_entry_goes():
    cache: Lru[str, int] = Lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a use: "b" is now the oldest
    cache.put("c", 3)
    assert ("a" in cache, "b" in cache, "c" in cache, len(cache)) == (True, False, True, 2)


def test_peek_reads_without_counting_as_a_use():
    cache: Lru[str, int] = Lru(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.peek("a") == 1
    cache.put("c", 3)
    assert "a" not in cache and cache.peek("b") == 2


def test_a_stored_falsy_value_is_found_and_a_missing_key_is_none():
    cache: Lru[str, object] = Lru(3)
    cache.put("empty", [])
    cache.put("none", None)
    assert cache.get("empty") == [] and cache.get("none") is None and cache.get("missing") is None
    assert cache.pop("empty") == [] and cache.pop("empty") is None and "empty" not in cache


def test_keeps_leaves_the_current_value_but_counts_the_put_as_a_use():
    cache: Lru[str, int] = Lru(2, keeps=lambda current, new: current >= new)
    cache.put("a", 5)
    cache.put("b", 1)
    cache.put("a", 3)  # kept: 5 stays, and "a" is now the newest
    cache.put("c", 1)
    assert cache.get("a") == 5 and "b" not in cache
    cache.put("a", 9)
    assert cache.get("a") == 9


def test_clear_empties_it():
    cache: Lru[int, int] = Lru(4)
    for i in range(4):
        cache.put(i, i)
    cache.clear()
    assert len(cache) == 0 and cache.get(0) is None


def test_many_threads_never_leave_it_over_its_size():
    cache: Lru[int, int] = Lru(16)

    def churn(offset: int) -> None:
        for i in range(2000):
            cache.put(offset + i % 40, i)
            cache.get(offset + (i * 7) % 40)

    threads = [threading.Thread(target=churn, args=(n * 100,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 16


def test_the_lock_makes_a_read_compute_write_one_step():
    cache: Lru[str, int] = Lru(4)
    cache.put("n", 0)

    def add() -> None:
        for _ in range(1000):
            with cache.lock:
                cache.put("n", cache.peek("n") + 1)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.get("n") == 4000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_ttl_entry_expires_its_seconds_after_it_was_read_and_none_can_be_cached():
    clock, missing = Clock(), object()
    cache: TtlLru[str, int | None] = TtlLru(10, seconds=lambda: 2.0, clock=clock)
    cache.put("known", 1)
    cache.put("unknown", None)  # e.g. a key nobody has: remembered as such
    cache.put("read-before", 3, read_at=99.5)  # read before the put: its time counts from the read
    clock.now = 101.9
    assert (cache.get("known"), cache.get("unknown", missing), cache.get("read-before", missing)) == (
        1, None, missing)
    clock.now = 102.0
    assert cache.get("known", missing) is missing and cache.get("unknown", missing) is missing
    assert len(cache) == 0  # an expired entry read is dropped


def test_a_ttl_map_is_bounded_like_the_lru_and_reads_its_seconds_at_each_put():
    clock, seconds = Clock(), [1.0]
    cache: TtlLru[str, int] = TtlLru(2, seconds=lambda: seconds[0], clock=clock)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    seconds[0] = 5.0  # a setting changed at run time applies to the next entry
    cache.put("d", 4)
    clock.now += 2
    assert (cache.get("c"), cache.get("d")) == (None, 4)
