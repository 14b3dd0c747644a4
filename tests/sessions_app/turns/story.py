"""What a simulated session's rollout must show after it ran: the whole story, checked line by line."""

from __future__ import annotations

from compaction_app.engine.items import is_real_user_message, message_text
from compaction_app.models import Compaction
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import selectors, services


def lines_of(session: Session) -> list[RolloutLine]:
    return list(RolloutLine.objects.filter(session=session).order_by("seq"))


def event_type(line: RolloutLine) -> str | None:
    return line.payload.get("type") if line.kind == "event_msg" else None


def turns_of(lines: list[RolloutLine]) -> list[list[RolloutLine]]:
    """The lines of each turn, from its turn_started to its turn_complete."""
    turns, current = [], None
    for line in lines:
        if event_type(line) == "turn_started":
            assert current is None, f"turn started at seq {line.seq} inside another turn"
            current = [line]
        elif current is not None:
            current.append(line)
            if event_type(line) == "turn_complete":
                turns.append(current)
                current = None
    assert current is None, "the last turn never completed"
    return turns


def check_story(session: Session) -> dict[str, int]:
    """Assert the rollout tells the whole story; returns counts of what it saw."""
    session.refresh_from_db()
    lines = lines_of(session)
    assert [ln.seq for ln in lines] == list(range(1, len(lines) + 1))
    turns = turns_of(lines)
    assert turns, "no turn ran"
    seen = {"turns": len(turns), "pre_turn": 0, "mid_turn": 0, "tool_calls": 0}

    # Windows advance by one per compaction, chained by ids (spec §9), and each has its Compaction row.
    meta = lines[0].payload
    window = (0, meta["window_id"], meta["first_window_id"])
    compactions = {c.rollout_seq: c for c in Compaction.objects.filter(session=session)}
    compacted_lines = [ln for ln in lines if ln.kind == "compacted"]
    assert len(compacted_lines) == len(compactions) == session.compaction_count
    for line in compacted_lines:
        payload = line.payload
        assert payload["window_number"] == window[0] + 1
        assert payload["previous_window_id"] == window[1] and payload["window_id"] != window[1]
        assert payload["first_window_id"] == window[2]
        assert compactions[line.seq].window_id == payload["window_id"]
        window = (payload["window_number"], payload["window_id"], window[2])
    assert (session.window_number, session.window_id) == window[:2]

    for turn in turns:
        turn_id = turn[0].payload["turn_id"]
        assert turn[-1].payload["turn_id"] == turn_id
        own_context = [i for i, ln in enumerate(turn) if ln.kind == "turn_context" and ln.payload["turn_id"] == turn_id
                       and "context_window" in ln.payload]
        failed = turn[-1].payload["status"] == "failed"
        if not own_context:
            assert failed, f"turn {turn_id} recorded no turn_context but did not fail"
            continue
        start = own_context[0]
        user = turn[start + 1]
        assert user.kind == "response_item" and is_real_user_message(user.payload)
        for i, line in enumerate(turn):
            if line.kind != "compacted":
                continue
            compaction = compactions[line.seq]
            if i < start:
                # Pre-turn: before the user input; the new message is not part of what was compacted.
                assert compaction.phase == "pre_turn"
                # (A looping script repeats its user texts, so compare counts with what came before.)
                text = message_text(user.payload)
                kept = [message_text(x) for x in line.payload["replacement_history"] if x.get("type") == "message"]
                earlier = sum(1 for ln in lines if ln.seq < line.seq and ln.kind == "response_item"
                              and is_real_user_message(ln.payload) and message_text(ln.payload) == text)
                assert kept.count(text) <= earlier
                # DoNotInject: the full initial context comes back before the new turn's baseline (spec §5.3).
                context = [ln for ln in turn[i + 1:start] if ln.kind == "response_item"]
                assert context and context[0].payload["role"] == "developer"
                seen["pre_turn"] += 1
            else:
                # Mid-turn: after a tool output, re-establishing the baseline, and sampling continues after it.
                assert compaction.phase == "mid_turn"
                before = [ln for ln in turn[:i] if ln.kind == "response_item"]
                assert before[-1].payload["type"] == "function_call_output"
                assert turn[i + 1].kind == "turn_context"
                assert any(ln.kind == "response_item" for ln in turn[i + 1:]) or failed
                seen["mid_turn"] += 1
        # Every function call is answered by its output, and every response's usage follows its items.
        calls = [ln.payload["call_id"] for ln in turn if ln.kind == "response_item"
                 and ln.payload["type"] == "function_call"]
        outputs = [ln.payload["call_id"] for ln in turn if ln.kind == "response_item"
                   and ln.payload["type"] == "function_call_output"]
        assert calls == outputs
        seen["tool_calls"] += len(calls)
        assert any(event_type(ln) == "token_count" for ln in turn[start:]) or failed

    # The live history is the newest replacement history plus every item after it, and a rebuild agrees.
    base = compacted_lines[-1] if compacted_lines else lines[0]
    expected = list(base.payload.get("replacement_history", []))
    expected += [ln.payload for ln in lines if ln.seq > base.seq and ln.kind == "response_item"]
    assert selectors.live_items(session=session) == expected
    assert services.verify_projection(session=session) == []
    return seen
