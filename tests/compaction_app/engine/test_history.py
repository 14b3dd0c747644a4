"""History transforms (spec §5, §6.1, §6.3)."""

from __future__ import annotations

import copy

import pytest

from compaction_app.engine.history import (
    CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE,
    Injection,
    build_compacted_history,
    build_v2_retained_history,
    collect_user_messages,
    filter_compacted_output,
    inject_initial_context,
    normalize_for_request,
    remove_oldest_item,
    select_user_messages,
    should_keep_compacted_history_item,
    trim_outputs_to_fit,
    truncate_middle,
    truncate_retained_messages,
)
from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from compaction_app.engine.tokens import estimate_item_tokens


def msg(role: str, *texts: str) -> dict:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": t} for t in texts]}


SUMMARY = user_message(f"{SUMMARY_PREFIX}\nold summary")
ENV = msg("user", "<environment_context>\n<cwd>/x</cwd>\n</environment_context>")
AGENTS = msg("user", "# AGENTS.md instructions for /x\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>")
DEV = msg("developer", "<permissions instructions>sandbox</permissions instructions>")
CTX = [DEV, ENV]


# --- collect_user_messages -------------------------------------------------------------------------------

def test_collect_user_messages_keeps_only_real_user_texts_oldest_first():
    items = [ENV, msg("user", "first"), msg("assistant", "reply"), SUMMARY, AGENTS, DEV, msg("user", "second")]
    assert collect_user_messages(items) == ["first", "second"]


def test_collect_user_messages_joins_text_parts_without_separator_and_skips_images():
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "look "},
        {"type": "input_text", "text": "<image>"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_text", "text": "</image>"},
        {"type": "input_text", "text": "here"},
    ]}
    assert collect_user_messages([item]) == ["look here"]


def test_collect_user_messages_rejects_uppercase_environment_context():
    assert collect_user_messages([msg("user", "<ENVIRONMENT_CONTEXT>x</ENVIRONMENT_CONTEXT>")]) == []


def test_collect_user_messages_excludes_hook_prompts():
    assert collect_user_messages([msg("user", '<hook_prompt hook_run_id="1">do</hook_prompt>')]) == []


# --- truncate_middle ---------------------------------------------------------------------------------------

def test_truncate_middle_spec_example():
    assert truncate_middle("middle1234", 2) == "midd…1 tokens truncated…1234"


def test_truncate_middle_returns_text_unchanged_when_it_fits():
    assert truncate_middle("12345678", 2) == "12345678"


def test_truncate_middle_with_zero_budget_is_only_the_marker():
    assert truncate_middle("abcdefghi", 0) == "…3 tokens truncated…"


def test_truncate_middle_of_empty_text_is_empty():
    assert truncate_middle("", 0) == ""
    assert truncate_middle("", 5) == ""


def test_truncate_middle_snaps_to_character_boundaries():
    # 13 bytes, budget 4 bytes: 2 for the head ("h" — "é" would need 3), 2 for the tail ("ld").
    assert truncate_middle("héllo wörld", 1) == "h…3 tokens truncated…ld"


def test_truncate_middle_rejects_negative_budget():
    with pytest.raises(ValueError):
        truncate_middle("abc", -1)


# --- build_compacted_history (§5.1) ------------------------------------------------------------------------

def test_build_compacted_history_keeps_messages_then_summary():
    history = build_compacted_history([], ["a", "b"], "S")
    assert history == [user_message("a"), user_message("b"), user_message("S")]


def test_build_compacted_history_prepends_initial_context():
    history = build_compacted_history(CTX, ["a"], "S")
    assert history == [DEV, ENV, user_message("a"), user_message("S")]


def test_build_compacted_history_uses_placeholder_for_empty_summary():
    assert build_compacted_history([], [], "") == [user_message("(no summary available)")]


def test_budget_walk_keeps_newest_truncates_first_that_does_not_fit_and_drops_older():
    old, middle, new = "o" * 40, "middle1234", "n" * 8  # 10, 3, 2 tokens
    assert select_user_messages([old, middle, new], max_tokens=4) == ["midd…1 tokens truncated…1234", new]


def test_budget_walk_stops_when_budget_is_exactly_spent():
    assert select_user_messages(["older", "abcd", "efgh"], max_tokens=2) == ["abcd", "efgh"]


def test_budget_walk_keeps_empty_messages_at_no_cost():
    assert select_user_messages(["a" * 8, "", "b" * 8], max_tokens=4) == ["a" * 8, "", "b" * 8]


def test_budget_zero_selects_nothing():
    assert select_user_messages(["a"], max_tokens=0) == []


def test_default_user_message_budget_is_20000_tokens():
    big = "x" * (20_000 * 4)
    assert select_user_messages(["older", big]) == [big]
    over = "x" * (20_000 * 4 + 4)
    (kept,) = select_user_messages(["older", over])
    assert kept == "x" * 40_000 + "…1 tokens truncated…" + "x" * 40_000


# --- §5.2 output filter ------------------------------------------------------------------------------------

def test_remote_output_filter_keeps_user_assistant_summary_hook_prompt_and_compaction_items():
    hook = msg("user", '<hook_prompt hook_run_id="h">check</hook_prompt>')
    kept = [msg("user", "u"), msg("assistant", "a"), SUMMARY, hook,
            {"type": "compaction", "encrypted_content": "E"}, {"type": "context_compaction"}]
    for item in kept:
        assert should_keep_compacted_history_item(item), item


def test_remote_output_filter_drops_developer_system_contextual_reasoning_tools_and_triggers():
    dropped = [DEV, msg("system", "s"), ENV, AGENTS, msg("user", "<turn_aborted>x</turn_aborted>"),
               {"type": "reasoning", "summary": []},
               {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c", "output": "o"},
               {"type": "custom_tool_call", "call_id": "c"}, {"type": "custom_tool_call_output", "call_id": "c"},
               {"type": "local_shell_call", "call_id": "c"}, {"type": "tool_search_call", "call_id": "c"},
               {"type": "tool_search_output", "call_id": "c"}, {"type": "web_search_call"},
               {"type": "image_generation_call"}, {"type": "compaction_trigger"}, {"type": "mystery"}]
    for item in dropped:
        assert not should_keep_compacted_history_item(item), item


def test_remote_output_filter_writes_compaction_summary_alias_as_compaction():
    out = filter_compacted_output([{"type": "compaction_summary", "encrypted_content": "E"}, DEV])
    assert out == [{"type": "compaction", "encrypted_content": "E"}]


# --- §5.3 injection -----------------------------------------------------------------------------------------

def test_do_not_inject_adds_no_context():
    history = [user_message("u"), SUMMARY]
    assert inject_initial_context(history, CTX, Injection.DO_NOT_INJECT) == history


def test_mid_turn_injects_context_before_last_real_user_message():
    history = [user_message("a"), user_message("b"), SUMMARY]
    assert inject_initial_context(history, CTX, Injection.BEFORE_LAST_USER_MESSAGE) == [
        user_message("a"), DEV, ENV, user_message("b"), SUMMARY]


def test_injection_without_user_messages_goes_before_the_summary_so_it_stays_last():
    history = [msg("assistant", "x"), SUMMARY]
    assert inject_initial_context(history, CTX, Injection.BEFORE_LAST_USER_MESSAGE) == [
        msg("assistant", "x"), DEV, ENV, SUMMARY]


def test_injection_without_user_like_items_goes_before_the_last_compaction_item():
    comp_a = {"type": "compaction", "encrypted_content": "A"}
    comp_b = {"type": "context_compaction", "encrypted_content": "B"}
    history = [comp_a, msg("assistant", "x"), comp_b]
    assert inject_initial_context(history, CTX, Injection.BEFORE_LAST_USER_MESSAGE) == [
        comp_a, msg("assistant", "x"), DEV, ENV, comp_b]


def test_injection_appends_when_nothing_else_applies():
    history = [msg("assistant", "x")]
    assert inject_initial_context(history, CTX, Injection.BEFORE_LAST_USER_MESSAGE) == [
        msg("assistant", "x"), DEV, ENV]


def test_injection_keeps_newer_summary_last_when_real_user_message_is_older():
    newer_summary = user_message(f"{SUMMARY_PREFIX}\nnew summary")
    history = [SUMMARY, user_message("u"), newer_summary]
    assert inject_initial_context(history, CTX, Injection.BEFORE_LAST_USER_MESSAGE) == [
        SUMMARY, DEV, ENV, user_message("u"), newer_summary]


# --- §5.4 v2 retention (Codex's own examples) --------------------------------------------------------------

def test_v2_retention_keeps_only_real_user_messages_and_the_new_compaction_last():
    old_comp = {"type": "compaction", "encrypted_content": "old"}
    new_comp = {"type": "compaction", "encrypted_content": "new"}
    items = [msg("developer", "dev"), msg("system", "sys"), msg("user", "user"),
             msg("assistant", "commentary"), msg("assistant", "final"),
             {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}, old_comp]
    history, images = build_v2_retained_history(items, new_comp)
    assert history == [msg("user", "user"), new_comp]
    assert images == 0


def test_v2_retention_discards_developer_and_contextual_messages_before_the_budget():
    huge_dev = msg("developer", "d" * ((64_000 + 1) * 4))
    huge_ctx = msg("user", "<environment_context>\n" + "c" * ((64_000 + 1) * 4) + "\n</environment_context>")
    comp = {"type": "compaction", "encrypted_content": "new"}
    history, _ = build_v2_retained_history([msg("user", "old"), huge_dev, huge_ctx, msg("user", "new")], comp)
    assert history == [msg("user", "old"), msg("user", "new"), comp]


def test_v2_retention_counts_retained_input_images():
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "user"},
        {"type": "input_image", "image_url": "data:image/png;base64,abc"},
        {"type": "input_image", "image_url": "data:image/png;base64,def"}]}
    _, images = build_v2_retained_history([item], {"type": "compaction", "encrypted_content": "x"})
    assert images == 2


def test_v2_retention_truncation_keeps_newest_messages_first():
    out = truncate_retained_messages([msg("user", "old-old"), msg("user", "middle1234"), msg("user", "new")], 3)
    assert out == [msg("user", "midd…1 tokens truncated…1234"), msg("user", "new")]


def test_v2_retention_truncation_keeps_images_and_truncates_later_text_parts():
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "abcdef"},
        {"type": "input_image", "image_url": "data:image/png;base64,abc"},
        {"type": "output_text", "text": "uvwxyz"}]}
    assert truncate_retained_messages([item], 3) == [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "abcdef"},
        {"type": "input_image", "image_url": "data:image/png;base64,abc"},
        {"type": "output_text", "text": "uv…1 tokens truncated…yz"}]}]


def test_v2_retention_charges_image_only_messages_one_token():
    image_only = {"type": "message", "role": "user",
                  "content": [{"type": "input_image", "image_url": "data:image/png;base64,abc"}]}
    assert truncate_retained_messages([msg("user", "old"), image_only, msg("user", "new")], 2) == [
        image_only, msg("user", "new")]


def test_v2_retention_drops_image_only_messages_after_budget_is_spent():
    image_only = {"type": "message", "role": "user",
                  "content": [{"type": "input_image", "image_url": "data:image/png;base64,abc"}]}
    assert truncate_retained_messages([image_only, msg("user", "new")], 1) == [msg("user", "new")]


def test_v2_retention_drops_later_text_parts_once_budget_is_used():
    item = msg("user", "abcd", "efgh", "ijkl")
    assert truncate_retained_messages([item], 1) == [msg("user", "abcd")]


# --- §6.3 output trimming ----------------------------------------------------------------------------------

def _call(cid):
    return {"type": "function_call", "call_id": cid, "name": "shell", "arguments": "{}"}


def test_output_trimming_rewrites_newest_outputs_until_the_history_fits():
    items = [msg("user", "go"), _call("a"), {"type": "function_call_output", "call_id": "a", "output": "A" * 4000},
             _call("b"), {"type": "function_call_output", "call_id": "b", "output": "B" * 4000}]
    total = sum(estimate_item_tokens(i) for i in items)
    result = trim_outputs_to_fit(items, total - 500)
    assert result.rewritten_outputs == 1
    assert result.items[:4] == items[:4]
    assert result.items[4] == {"type": "function_call_output", "call_id": "b",
                               "output": CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE}
    assert result.estimated_deleted_tokens == estimate_item_tokens(items[4]) - estimate_item_tokens(result.items[4])


def test_output_trimming_stops_at_the_first_item_that_is_not_an_output():
    items = [_call("a"), {"type": "function_call_output", "call_id": "a", "output": "A" * 4000},
             msg("assistant", "between"),
             {"type": "custom_tool_call_output", "call_id": "b", "output": {"content": "B" * 40, "success": False}},
             {"type": "tool_search_output", "call_id": "c", "tools": [{"name": "t"}], "status": "completed"}]
    result = trim_outputs_to_fit(items, 1)
    assert result.rewritten_outputs == 2
    assert result.items == [
        items[0], items[1], items[2],
        {"type": "custom_tool_call_output", "call_id": "b",
         "output": {"content": CONTEXT_WINDOW_TRUNCATED_OUTPUT_MESSAGE, "success": False}},
        {"type": "tool_search_output", "call_id": "c", "tools": [], "status": "completed"},
    ]


def test_output_trimming_counts_base_instructions_and_leaves_a_fitting_history_alone():
    items = [{"type": "function_call_output", "call_id": "a", "output": "A" * 400}]
    window = estimate_item_tokens(items[0])
    assert trim_outputs_to_fit(items, window).rewritten_outputs == 0
    assert trim_outputs_to_fit(items, window, base_instructions="abcd").rewritten_outputs == 1


def test_output_trimming_does_nothing_when_the_window_is_unknown():
    items = [{"type": "function_call_output", "call_id": "a", "output": "A" * 400}]
    assert trim_outputs_to_fit(items, None).items == items


def test_output_trimming_never_mutates_its_input():
    items = [_call("a"), {"type": "function_call_output", "call_id": "a", "output": "A" * 400}]
    before = copy.deepcopy(items)
    trim_outputs_to_fit(items, 1)
    assert items == before


# --- normalisation and §6.1 ----------------------------------------------------------------------------------

def test_normalize_adds_aborted_output_for_unanswered_call_and_drops_orphan_outputs():
    items = [_call("a"), msg("user", "x"), {"type": "function_call_output", "call_id": "zzz", "output": "o"},
             {"type": "custom_tool_call", "call_id": "b", "name": "apply", "input": "p"}]
    assert normalize_for_request(items) == [
        _call("a"), {"type": "function_call_output", "call_id": "a", "output": "aborted"}, msg("user", "x"),
        {"type": "custom_tool_call", "call_id": "b", "name": "apply", "input": "p"},
        {"type": "custom_tool_call_output", "call_id": "b", "output": "aborted"}]


def test_normalize_removes_ghost_snapshots_and_triggers_and_renames_compaction_summary():
    items = [{"type": "ghost_snapshot", "ghost_commit": {}}, {"type": "compaction_summary", "encrypted_content": "E"},
             {"type": "compaction_trigger"}, msg("user", "x")]
    assert normalize_for_request(items) == [{"type": "compaction", "encrypted_content": "E"}, msg("user", "x")]


def test_normalize_replaces_images_for_text_only_models():
    item = {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "data:image/png;base64,A"}]}
    assert normalize_for_request([item], supports_images=False) == [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "see"},
        {"type": "input_text", "text": "image content omitted because you do not support image input"}]}]
    assert normalize_for_request([item]) == [item]


def test_normalize_replaces_images_in_tool_outputs_and_drops_generated_images_for_text_only_models():
    call = {"type": "function_call", "name": "view_image", "call_id": "c1", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": [
        {"type": "input_text", "text": "the screenshot"},
        {"type": "input_image", "image_url": "data:image/png;base64,A"}]}
    generated = {"type": "image_generation_call", "id": "ig1", "status": "completed", "result": "QUJD"}
    text_only = normalize_for_request([call, output, generated], supports_images=False)
    assert text_only[1]["output"] == [
        {"type": "input_text", "text": "the screenshot"},
        {"type": "input_text", "text": "image content omitted because you do not support image input"}]
    assert text_only[2] == {**generated, "result": ""}
    assert normalize_for_request([call, output, generated]) == [call, output, generated]


def test_remove_oldest_item_also_removes_the_output_of_a_call():
    out_a = {"type": "function_call_output", "call_id": "a", "output": "o"}
    items = [_call("a"), msg("user", "x"), out_a, msg("user", "y")]
    assert remove_oldest_item(items) == [msg("user", "x"), msg("user", "y")]


def test_remove_oldest_item_also_removes_the_call_of_an_output():
    out_a = {"type": "function_call_output", "call_id": "a", "output": "o"}
    assert remove_oldest_item([out_a, msg("user", "x"), _call("a")]) == [msg("user", "x")]


def test_remove_oldest_item_of_a_plain_item_removes_only_it():
    assert remove_oldest_item([msg("user", "x"), msg("user", "y")]) == [msg("user", "y")]
    assert remove_oldest_item([]) == []


def test_retained_messages_default_to_a_64000_token_budget_newest_first():
    older, newer = msg("user", "a" * 160_000), msg("user", "b" * 160_000)  # 40,000 tokens each
    kept = truncate_retained_messages([older, newer])
    assert kept == truncate_retained_messages([older, newer], 64_000)
    assert kept != truncate_retained_messages([older, newer], 64_001)
    assert kept[-1] == newer
    assert len(kept[0]["content"][0]["text"]) < 160_000  # the older one is cut to the 24,000 tokens left
