"""Hypothesis strategies for random Codex rollouts and the simple compactweb fold the properties compare with."""

import json

from hypothesis import strategies as st

from compaction_app.engine.items import SUMMARY_PREFIX, user_message

HISTORY_REPLACING_KINDS = ("compacted", "rollback", "redo")


def compactweb_fold(lines):
    """compactweb's projection: response_item appends, a history-replacing line installs its replacement."""
    history = []
    for kind, payload in lines:
        if kind == "response_item":
            history.append(payload)
        elif kind in HISTORY_REPLACING_KINDS and isinstance(payload.get("replacement_history"), list):
            history = list(payload["replacement_history"])
    return history


words = st.sampled_from(["fix", "the", "test", "añadir", "docs", "ship", "🙂", ""])
texts = st.lists(words, min_size=1, max_size=4).map(" ".join)


def _assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _developer(*texts):
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": t} for t in texts]}


items = st.one_of(
    texts.map(user_message),
    texts.map(lambda t: user_message(SUMMARY_PREFIX + "\n" + t)),
    st.just(user_message("<environment_context>\n  <cwd>/r</cwd>\n</environment_context>")),
    texts.map(_assistant),
    st.just(_developer("<permissions instructions>x</permissions instructions>")),
    st.just(_developer("<model_switch>m</model_switch>", "persistent text")),
    st.just({"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}),
    st.integers(0, 3).map(lambda n: {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": f"c{n}"}),
    st.integers(0, 3).map(lambda n: {"type": "function_call_output", "call_id": f"c{n}", "output": "ok"}),
)
turn_ids = st.sampled_from(["t1", "t2", "t3", "t4"])
windows = st.fixed_dictionaries(
    {},
    optional={
        "window_number": st.integers(0, 9),
        "window_id": st.one_of(st.integers(0, 9), st.sampled_from(["w-a", "w-b"])),
        "previous_window_id": st.sampled_from(["w-0", "w-1"]),
        "first_window_id": st.just("w-0"),
    },
)


def _compacted(history, message, window):
    payload = {"message": message, **window}
    if history is not None:
        payload["replacement_history"] = history
    return ("compacted", payload)


codex_lines = st.one_of(
    items.map(lambda item: ("response_item", item)),
    items.map(lambda item: ("response_item", item)),
    st.builds(_compacted, st.lists(items, max_size=5), st.sampled_from(["", SUMMARY_PREFIX + "\ns"]), windows),
    st.builds(_compacted, st.none(), texts.map(lambda t: SUMMARY_PREFIX + "\n" + t), windows),
    st.integers(0, 4).map(lambda n: ("event_msg", {"type": "thread_rolled_back", "num_turns": n})),
    turn_ids.map(lambda t: ("event_msg", {"type": "task_started", "turn_id": t})),
    turn_ids.map(lambda t: ("event_msg", {"type": "turn_complete", "turn_id": t})),
    turn_ids.map(lambda t: ("event_msg", {"type": "turn_aborted", "turn_id": t})),
    texts.map(lambda t: ("event_msg", {"type": "user_message", "message": t})),
    st.just(("event_msg", {"type": "token_count", "info": None})),
    turn_ids.map(lambda t: ("turn_context", {"turn_id": t, "model": f"model-{t}"})),
    st.just(("world_state", {"kind": "patch"})),
    st.just(("not_a_codex_kind", {"x": 1})),
)


def to_jsonl(lines):
    return [
        json.dumps({"timestamp": f"2026-04-19T10:00:{i % 60:02d}.{i % 1000:03d}Z", "type": kind, "payload": payload})
        for i, (kind, payload) in enumerate(lines)
    ]


@st.composite
def _turn(draw, number):
    """One Codex turn as it is written: started, user message, turn context, items, maybe a compaction, complete."""
    tid = f"t{number}"
    text = draw(texts)
    body = [("event_msg", {"type": "task_started", "turn_id": tid})]
    if draw(st.booleans()):
        body += [("event_msg", {"type": "user_message", "message": text}),
                 ("turn_context", {"turn_id": tid, "model": f"model-{number}"}),
                 ("response_item", user_message(text))]
    body += [("response_item", item) for item in draw(st.lists(items, max_size=3))]
    if draw(st.integers(0, 2)) == 0:
        body.append(draw(st.one_of(
            st.builds(_compacted, st.lists(items, max_size=5), st.just(""), windows),
            st.builds(_compacted, st.none(), texts.map(lambda t: SUMMARY_PREFIX + "\n" + t), windows),
        )))
        if draw(st.booleans()):
            body.append(("turn_context", {"turn_id": tid, "model": f"model-{number}"}))
    body += [("response_item", item) for item in draw(st.lists(items, max_size=2))]
    body.append(("event_msg", {"type": "task_complete", "turn_id": tid}))
    if draw(st.integers(0, 3)) == 0:
        body.append(("event_msg", {"type": "thread_rolled_back", "num_turns": draw(st.integers(0, 4))}))
    return body


@st.composite
def turn_rollouts(draw):
    """Rollouts made of whole turns, so segments, compactions and rollbacks interact as in real files."""
    count = draw(st.integers(1, 6))
    return [line for number in range(1, count + 1) for line in draw(_turn(number))]


any_rollout = st.one_of(st.lists(codex_lines, max_size=40), turn_rollouts())
