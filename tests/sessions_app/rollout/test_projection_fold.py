"""The projection fold (pure): what each rollout line kind does to the live state (spec §8.2, §9, §5.3)."""

import pytest

from sessions_app.rollout import projection as p

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]}
ASSISTANT = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}


def fold(*lines):
    return p.Projection.rebuild([p.Line(seq=i + 1, kind=k, payload=pl, tokens=t, item_tokens=it) for i, (k, pl, t, it) in enumerate(lines)])


def meta(window="w0", tokens=4):
    return (p.SESSION_META, {"window_number": 0, "window_id": window, "first_window_id": window, "model": "m1"}, tokens, None)


def item(payload, tokens=5):
    return (p.RESPONSE_ITEM, payload, tokens, None)


def test_response_items_append_in_order():
    proj = fold(meta(), item(USER), item(ASSISTANT))
    assert proj.items == [USER, ASSISTANT]
    assert [e.source_seq for e in proj.entries] == [2, 3]
    assert [e.model_generated for e in proj.entries] == [False, True]


def test_compacted_replaces_history_and_opens_its_window():
    compacted = (p.COMPACTED, {"replacement_history": [USER], "window_number": 1, "window_id": "w1", "previous_window_id": "w0", "first_window_id": "w0"}, 5, [5])
    proj = fold(meta(), item(USER), item(ASSISTANT), (p.TURN_CONTEXT, {"model": "m2"}, 0, None), compacted)
    assert proj.items == [USER]
    h = proj.header
    assert (h.window_number, h.window_id, h.previous_window_id, h.first_window_id) == (1, "w1", "w0", "w0")
    assert (h.compaction_count, h.reference_context_set, h.model, h.item_count) == (1, False, "m2", 1)
    assert p.m.active_total(h.meter) == 4 + 5


def test_rollback_installs_the_history_it_carries_and_its_window():
    rollback = (p.ROLLBACK, {"replacement_history": [USER, ASSISTANT], "window_number": 0, "window_id": "w0", "previous_window_id": None, "reference_context_set": True}, 10, [5, 5])
    compacted = (p.COMPACTED, {"replacement_history": [], "window_number": 1, "window_id": "w1", "previous_window_id": "w0"}, 0, [])
    proj = fold(meta(), item(USER), item(ASSISTANT), compacted, rollback)
    assert proj.items == [USER, ASSISTANT]
    assert (proj.header.window_id, proj.header.window_number, proj.header.reference_context_set) == ("w0", 0, True)
    assert proj.header.previous_window_id == ""


def test_window_opened_changes_the_window_but_not_the_history():
    proj = fold(meta(), item(USER), (p.WINDOW_OPENED, {"window_number": 1, "window_id": "w1", "previous_window_id": "w0"}, 0, None))
    assert proj.items == [USER]
    assert proj.header.window_id == "w1"


def test_unknown_kinds_change_nothing_but_the_seq():
    proj = fold(meta(), item(USER), ("world_state", {"x": 1}, 0, None))
    assert proj.items == [USER] and proj.header.last_seq == 3


def test_lines_must_follow_each_other():
    with pytest.raises(p.ProjectionError, match="does not follow"):
        p.apply_line(p.Header(), p.Line(seq=2, kind=p.RESPONSE_ITEM, payload=USER))


def test_a_legacy_compacted_line_without_replacement_history_is_refused():
    with pytest.raises(p.ProjectionError, match="legacy"):
        fold(meta(), (p.COMPACTED, {"message": "old summary"}, 0, None))


def test_a_history_line_needs_one_stored_count_per_item():
    with pytest.raises(p.ProjectionError, match="one stored token count"):
        fold(meta(), (p.COMPACTED, {"replacement_history": [USER]}, 0, None))


def test_extra_handlers_can_fold_other_kinds():
    def thread_rolled_back(header, line):
        return header, p.Replaced(())

    proj = p.Projection(handlers={"thread_rolled_back": thread_rolled_back})
    proj.apply(p.Line(seq=1, kind=p.RESPONSE_ITEM, payload=USER, tokens=1))
    proj.apply(p.Line(seq=2, kind="thread_rolled_back", payload={"num_turns": 1}))
    assert proj.items == []


def test_token_count_events_feed_the_meter():
    usage = (p.EVENT_MSG, {"type": "token_count", "info": {"last_token_usage": {"input_tokens": 80, "total_tokens": 100}}}, 0, None)
    no_info = (p.EVENT_MSG, {"type": "token_count", "info": None}, 0, None)
    proj = fold(meta(), item(ASSISTANT), usage, no_info)
    assert p.m.active_total(proj.header.meter) == 100
    assert proj.header.meter.prefill == 80
