"""A Claude Code transcript becomes compactweb lines whose fold is Claude Code's live history (issue 35):
the main chain of its tree, compact boundaries as compactions with their trigger and the messages a partial
compaction kept, branch switches as rollbacks, usage from the server, and the rest left in the file."""

from __future__ import annotations

import json
from pathlib import Path

from sessions_app.claude_transcript import TranscriptReader, is_transcript_file, looks_like_claude_transcript
from sessions_app.claude_transcript.convert import BRANCH_SOURCE
from sessions_app.rollout import projection as p
from tests.sessions_app.claude_transcript.transcripts import (
    Transcript,
    conversation_with_two_compactions,
    text,
    tool_result,
    tool_use,
)


def _fold(lines) -> list[dict]:
    history: list[dict] = []
    for line in lines:
        if line.kind == p.RESPONSE_ITEM:
            history.append(line.payload)
        elif isinstance(line.payload.get("replacement_history"), list):
            history = list(line.payload["replacement_history"])
    return history


def _read(t: Transcript):
    reader = TranscriptReader()
    return reader, reader.feed(t.bytes().splitlines(keepends=True), first_line_no=1)


def _user(value: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}


def _assistant(value: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": value}]}


def test_the_conversation_becomes_items_and_attachments_bookkeeping_and_subagents_stay_out_of_the_history():
    t = Transcript()
    t.user("fix parser bug 3")
    t.attachment()
    t.assistant([text("Looking."), tool_use("toolu_1", "ls -a")], message_id="msg_1")
    t.user(tool_result("toolu_1", ".\n.."))
    t.sidechain("a subagent's prompt")
    t.bookkeeping("last-prompt", lastPrompt="fix parser bug 3")
    reader, chunk = _read(t)
    assert _fold(chunk.lines) == [
        _user("fix parser bug 3"), _assistant("Looking."),
        {"type": "function_call", "call_id": "toolu_1", "name": "Bash", "arguments": json.dumps({"command": "ls -a"})},
        {"type": "function_call_output", "call_id": "toolu_1", "output": ".\n.."},
    ]
    assert chunk.sidechain_entries == 1
    assert chunk.kind_counts == {"user": 3, "attachment": 1, "assistant": 2, "last-prompt": 1}
    assert reader.meta.session_meta()["format"] == "claude_code" and reader.first_prompt == "fix parser bug 3"


def test_usage_is_the_servers_once_per_assistant_message_with_the_cache_counted_as_input():
    t = Transcript()
    t.user("go")
    t.assistant([text("a"), tool_use("toolu_1", "ls")], message_id="msg_1",
                usage={"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 9000,
                       "output_tokens": 7})
    _, chunk = _read(t)
    (usage,) = [x.payload for x in chunk.lines if x.kind == p.EVENT_MSG]
    assert usage["source"] == "server"
    assert usage["info"]["last_token_usage"] == {"input_tokens": 9015, "cached_input_tokens": 9000,
                                                 "output_tokens": 7, "reasoning_output_tokens": 0,
                                                 "total_tokens": 9022}


def test_a_compact_boundary_and_its_summary_are_one_compaction_keeping_the_preserved_messages():
    t = conversation_with_two_compactions()
    _, chunk = _read(t)
    compacted = [x for x in chunk.lines if x.kind == p.COMPACTED]
    assert len(compacted) == 2
    auto, manual = compacted
    summary = auto.payload["replacement_history"][0]
    assert summary["role"] == "user" and auto.payload["message"].endswith("write the loader docs.")
    assert auto.payload["replacement_history"][1:] == [
        {"type": "function_call", "call_id": "toolu_2", "name": "Bash", "arguments": json.dumps({"command": "cat notes.txt"})},
        {"type": "function_call_output", "call_id": "toolu_2", "output": "bug 3 fixed"},
    ]
    assert auto.payload["pre_tokens"] == 9562 and auto.payload["window_number"] == 1
    assert manual.payload["window_number"] == 2 and manual.payload["previous_window_id"] == auto.payload["window_id"]
    assert len(manual.payload["replacement_history"]) == 1
    labels = [chunk.labels[x.source_line_no] for x in compacted]
    assert [(x.trigger, x.reason, x.phase) for x in labels] == [
        ("auto", "context_limit", "mid_turn"), ("manual", "user_requested", "standalone_turn")]
    assert {x.implementation for x in labels} == {"responses"}
    assert _fold(chunk.lines)[1:] == [_user("add a changelog entry"), _assistant("Added.")]


def test_a_rewind_to_an_earlier_entry_makes_that_branch_the_live_history():
    t = Transcript()
    first = t.user("first prompt")
    t.assistant([text("first answer")], message_id="msg_1")
    t.user("second prompt")
    t.assistant([text("second answer")], message_id="msg_2")
    # The user rewinds to after the first answer and asks something else: a side branch becomes the live one.
    answer = [e["uuid"] for e in t.lines if e.get("message", {}).get("id") == "msg_1"][0]
    t.user("another second prompt", parent=answer)
    t.assistant([text("another answer")], message_id="msg_3")
    _, chunk = _read(t)
    (rollback,) = [x for x in chunk.lines if x.kind == "rollback"]
    assert rollback.payload["source"] == BRANCH_SOURCE and rollback.payload["to_uuid"] == answer
    assert rollback.payload["replacement_history"] == [_user("first prompt"), _assistant("first answer")]
    assert _fold(chunk.lines) == [_user("first prompt"), _assistant("first answer"),
                                  _user("another second prompt"), _assistant("another answer")]
    assert first


def test_reading_line_by_line_gives_what_reading_the_whole_file_gives():
    data = conversation_with_two_compactions().bytes().splitlines(keepends=True)
    _, whole = TranscriptReader(), TranscriptReader().feed(data, first_line_no=1)
    reader, pieces = TranscriptReader(), []
    for n, line in enumerate(data, start=1):
        pieces.extend(reader.feed([line], first_line_no=n).lines)
    assert pieces == whole.lines


def test_bad_lines_are_skipped_and_reported_and_the_rest_is_read():
    t = Transcript()
    t.user("hello")
    data = t.bytes() + b'{"type":"assistant","message":{"content":[{"type":"te\n' + b"[1,2]\n"
    reader = TranscriptReader()
    chunk = reader.feed(data.splitlines(keepends=True), first_line_no=1)
    assert [(x.line_no, x.action) for x in chunk.problems] == [(2, "skipped"), (3, "skipped")]
    assert "cut short" in chunk.problems[0].reason
    assert _fold(chunk.lines) == [_user("hello")]


def test_the_format_is_told_apart_from_a_codex_rollout_and_transcript_files_by_their_name():
    assert looks_like_claude_transcript(conversation_with_two_compactions().bytes().splitlines()[:3])
    codex = b'{"timestamp":"2026-12-01T08:48:42.000Z","type":"session_meta","payload":{"id":"x"}}\n'
    assert not looks_like_claude_transcript([codex])
    assert is_transcript_file(Path("projects/-home-dev/2e3879cd-1426-4b0b-ba41-01a02dba7e6e.jsonl"))
    assert not is_transcript_file(Path("x/subagents/agent-a1b2.jsonl"))
    assert not is_transcript_file(Path("rollout-2026-12-01T08-48-42-0199.jsonl"))


def test_json_no_database_stores_is_skipped_and_nul_characters_are_removed_and_reported():
    t = Transcript()
    t.user("hello\u0000there")
    data = t.bytes() + b'{"type":"user","n":NaN}\n' + b'{"type":"user","n":123456789012345678901234567890}\n'
    chunk = TranscriptReader().feed(data.splitlines(keepends=True), first_line_no=1)
    assert [(x.line_no, x.action) for x in chunk.problems] == [(1, "repaired"), (2, "skipped"), (3, "skipped")]
    assert "NUL" in chunk.problems[0].reason
    assert _fold(chunk.lines) == [_user("hellothere")]
