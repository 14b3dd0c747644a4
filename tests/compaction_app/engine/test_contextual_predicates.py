"""The real / contextual user-message predicate (spec §1.2) in its fine points: ASCII case-insensitive markers,
Rust's `trim()`, the legacy warnings' full text, hook prompts, and `<image>` labels."""

from __future__ import annotations

import pytest

from compaction_app.engine.history import collect_user_messages, should_keep_compacted_history_item
from compaction_app.engine.items import (
    is_contextual_user_message,
    is_hook_prompt_message,
    is_real_user_message,
    is_user_turn_boundary,
    message_text,
    rust_trim,
    user_message,
)


def parts(*texts: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t} for t in texts]}


@pytest.mark.parametrize("text", [
    "# agents.md instructions for /repo\n\n<INSTRUCTIONS>x</INSTRUCTIONS>",
    "# AGENTS.MD INSTRUCTIONS FOR /repo\n<instructions>x</Instructions>",
    "<ENVIRONMENT_CONTEXT>\n  <cwd>/r</cwd>\n</Environment_Context>",
    "\u3000<user_shell_command>ls</user_shell_command>\u2028",
])
def test_markers_match_ascii_case_insensitively_after_a_unicode_whitespace_trim(text):
    assert is_contextual_user_message(user_message(text)) and not is_real_user_message(user_message(text))


def test_a_non_ascii_look_alike_does_not_match_a_marker():
    # U+212A KELVIN SIGN lowercases to "k" in Python, never in an ASCII comparison.
    text = "<s\u212aill>x</skill>"
    assert is_real_user_message(user_message(text))


def test_trimming_follows_rust_which_keeps_the_ascii_separator_controls():
    assert rust_trim("\x1c x \u2003") == "\x1c x"
    text = "\x1c<environment_context>x</environment_context>"
    assert is_real_user_message(user_message(text))


@pytest.mark.parametrize("text", [
    "Warning: The maximum number of unified exec processes you can keep open is 60 and you currently have 61",
    "  Warning: apply_patch was requested via exec_command. Use the apply_patch tool instead of exec_command.\n",
    "Warning: Your account was flagged for potentially high-risk cyber activity and this request was routed",
])
def test_the_three_legacy_warnings_are_never_user_turns(text):
    item = user_message(text)
    assert not is_user_turn_boundary(item)
    assert collect_user_messages([item, user_message("real")]) == ["real"]
    assert not should_keep_compacted_history_item(item)


def test_an_apply_patch_warning_needs_its_full_text():
    assert is_real_user_message(user_message("Warning: apply_patch was requested via exec_command."))


def test_a_hook_prompt_is_every_part_a_fragment_with_a_non_empty_run_id():
    hook = '<hook_prompt hook_run_id="run-1">check the tests</hook_prompt>'
    assert is_hook_prompt_message(parts(hook, '<hook_prompt hook_run_id="run-2">and lint</hook_prompt>'))
    assert should_keep_compacted_history_item(parts(hook))
    # A fragment next to ordinary text: contextual, but not a hook prompt, so the §5.2 filter drops it.
    mixed = parts(hook, "and also this")
    assert is_contextual_user_message(mixed) and not is_hook_prompt_message(mixed)
    assert not should_keep_compacted_history_item(mixed)


@pytest.mark.parametrize("text", ['<hook_prompt hook_run_id="">x</hook_prompt>',
                                  '<hook_prompt hook_run_id="  ">x</hook_prompt>', "<hook_prompt>x</hook_prompt>"])
def test_a_hook_prompt_without_a_run_id_is_an_ordinary_user_message(text):
    assert not is_hook_prompt_message(parts(text)) and is_real_user_message(parts(text))


def test_image_labels_are_skipped_only_around_an_image():
    image = {"type": "input_image", "image_url": "https://x/y.png"}
    around = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look "}, {"type": "input_text", "text": "<image>"}, image,
        {"type": "input_text", "text": "</image>"}]}
    assert message_text(around) == "look "
    assert message_text(user_message("<image>")) == "<image>"
    assert collect_user_messages([user_message("<image>")]) == ["<image>"]


AGENTS_HEADING = "# AGENTS.md instructions for /repo"


@pytest.mark.parametrize(("text", "contextual"), [
    (f"{AGENTS_HEADING}\n\n<INSTRUCTIONS>\nrun ruff\n</INSTRUCTIONS>", True),
    (f"  {AGENTS_HEADING.lower()}\n<instructions>x</instructions>\n", True),  # ASCII case-insensitive, trimmed
    (f"{AGENTS_HEADING}\n\nplease read it and fix the tests", False),  # the heading alone: typed by a user
    ("run ruff\n</INSTRUCTIONS>", False),
])
def test_the_agents_md_fragment_needs_both_of_its_markers(text, contextual):
    from compaction_app.engine.items import is_contextual_text

    assert is_contextual_text(text) is contextual


@pytest.mark.django_db
def test_a_local_compaction_keeps_a_user_message_that_only_starts_like_agents_md(scripted_sessions):
    from tests.fakes.scripted_api import text_reply

    def user(text):
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}

    typed = f"{AGENTS_HEADING}\n\nplease read it and fix the tests"
    injected = f"{AGENTS_HEADING}\n\n<INSTRUCTIONS>\nrun ruff\n</INSTRUCTIONS>"
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "on it"}]}
    session = scripted_sessions.create(items=[user(injected), user(typed), answer])
    scripted_sessions.script.add(text_reply("the summary"))
    compacted = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "local"},
                                           format="json")
    assert compacted.status_code in (200, 201), compacted.json()
    texts = [i["content"][0]["text"] for i in scripted_sessions.history(session["id"]) if i.get("role") == "user"]
    assert typed in texts  # a real user message survives the compaction (spec §5.1)
    assert injected not in texts  # injected context does not
