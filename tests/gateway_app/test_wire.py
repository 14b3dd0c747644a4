"""Issue 29: the recorder reads a Responses SSE stream (whole or in any chunks) into its output items, usage and id,
skipping the events it does not keep."""

from __future__ import annotations

import json

from gateway_app import wire

ITEM = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "an error was fixed"}]}


def _stream() -> bytes:
    _, data = wire.sse_response(model="m", output=[ITEM], usage={"input_tokens": 7, "output_tokens": 3})
    delta = {"type": "response.output_text.delta", "delta": "an error"}
    return (f"event: response.output_text.delta\ndata: {json.dumps(delta)}\n\n").encode() + data


def test_the_reader_keeps_output_usage_and_id_however_the_stream_is_cut():
    raw = _stream()
    for size in (1, 7, len(raw)):
        reader = wire.SseReader()
        for start in range(0, len(raw), size):
            reader.feed(raw[start:start + size])
        summary = reader.finish()
        assert summary.completed and summary.output == [ITEM]
        assert summary.usage == {"input_tokens": 7, "output_tokens": 3} and summary.response_id.startswith("resp_")


def test_a_failed_stream_is_reported_and_not_completed():
    reader = wire.SseReader()
    reader.feed(b'event: response.failed\ndata: {"type": "response.failed", "response": {"error": {"code": "x"}}}\n\n')
    summary = reader.finish()
    assert not summary.completed and "response.failed" in summary.error


def _message(role: str, text: str) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def test_a_handle_expands_over_everything_before_it_and_only_developer_instructions_stay_as_the_base():
    developer, user = _message("developer", "be brief"), _message("user", "fix the parser")
    replacement = [_message("user", "summary of the work")]
    after = _message("user", "and the docs")
    handle = {"type": "compaction", "encrypted_content": "cwgh_x"}

    assert wire.expand([developer, user, handle, after], 2, replacement) == [developer, *replacement, after]
    # A history whose first item is the user's own has no base instructions: it is replaced like the rest.
    assert wire.expand([user, handle, after], 1, replacement) == [*replacement, after]


def test_a_request_without_a_thread_is_grouped_by_its_prompt_cache_key():
    assert wire.group_key(meta={}, body={"prompt_cache_key": "0190-abc"}) == "cache:0190-abc"
    # A thread id that is no string (a malformed header) does not group; the cache key still does.
    assert wire.group_key(meta={"thread_id": 42}, body={"prompt_cache_key": "0190-abc"}) == "cache:0190-abc"
    assert wire.group_key(meta={"thread_id": "t-1"}, body={"prompt_cache_key": "0190-abc"}) == "thread:t-1"
    assert wire.group_key(meta={}, body={}) == ""


def test_an_empty_or_non_string_prompt_cache_key_groups_nothing():
    # (every client sending "" would otherwise share one group; a number is no key)
    assert wire.group_key(meta={}, body={"prompt_cache_key": ""}) == ""
    assert wire.group_key(meta={}, body={"prompt_cache_key": 42}) == ""


def test_turn_metadata_with_a_session_id_and_no_thread_id_groups_by_the_session_id():
    # (a client whose metadata names its session and no thread: the session id comes before the cache key)
    assert wire.group_key(meta={"session_id": "s-1"}, body={"prompt_cache_key": "0190-abc"}) == "thread:s-1"
    assert wire.group_key(meta={"session_id": "s-1", "thread_id": "t-1"}, body={}) == "thread:t-1"


def test_developer_instructions_first_stay_as_the_base_whatever_item_follows_them():
    developer, after = _message("developer", "be brief"), _message("user", "and the docs")
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    handle = {"type": "compaction", "encrypted_content": "cwgh_x"}
    replacement = [_message("user", "summary of the work")]

    assert wire.expand([developer, call, handle, after], 2, replacement) == [developer, *replacement, after]


def test_a_long_thread_id_groups_by_its_first_200_characters():
    # (the group key's column holds 300: the prefix and 200 characters fit whatever the client sends)
    assert wire.group_key(meta={"thread_id": "t" * 250}, body={}) == "thread:" + "t" * 200
    assert wire.group_key(meta={}, body={"prompt_cache_key": "c" * 250}) == "cache:" + "c" * 200


def test_a_new_handle_is_its_prefix_and_24_random_bytes_url_safe():
    import re

    first, second = wire.new_handle(), wire.new_handle()
    assert re.fullmatch(r"cwgh_[A-Za-z0-9_-]{32}", first) and first != second
