"""A request's input is a snapshot of the session's growing history: taken without a copy, unchanged by later
appends, and read like the list it stands for."""

import json

import pytest

from compaction_app.engine.history_snapshot import HistorySnapshot, as_list


def _items(n: int) -> list[dict]:
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"m{i}"}]}
            for i in range(n)]


def test_a_snapshot_keeps_its_items_when_the_history_grows_after_it():
    history = _items(3)
    snapshot = HistorySnapshot(history)
    history.extend(_items(2))
    assert len(snapshot) == 3
    assert list(snapshot) == history[:3]
    assert list(reversed(snapshot)) == history[2::-1]
    assert snapshot == history[:3] and snapshot != history
    assert snapshot[-1] is history[2]
    with pytest.raises(IndexError):
        snapshot[3]


def test_a_snapshot_slices_and_compares_like_a_list():
    history = _items(5)
    snapshot = HistorySnapshot(history, 4)
    assert snapshot[1:] == history[1:4] and snapshot[-2:] == history[2:4] and snapshot[::2] == history[0:4:2]
    assert snapshot == HistorySnapshot(list(history), 4)
    assert not HistorySnapshot([]) and bool(snapshot)
    assert history[0] in snapshot and history[4] not in snapshot
    assert snapshot.index(history[3]) == 3


def test_a_snapshot_extends_an_earlier_snapshot_of_the_same_list_only():
    history = _items(4)
    earlier = HistorySnapshot(history)
    history.extend(_items(1))
    later = HistorySnapshot(history)
    assert later.extends(earlier) and later.extends(later)
    assert not earlier.extends(later)  # shorter: not an extension
    assert not later.extends(HistorySnapshot(list(history)))  # equal items, another list: compare them instead
    assert not later.extends(history)


def test_a_snapshot_becomes_a_plain_list_for_a_json_encoder():
    history = _items(3)
    snapshot = HistorySnapshot(history, 2)
    assert json.loads(json.dumps(as_list(snapshot))) == history[:2]
    assert as_list(history) is history
