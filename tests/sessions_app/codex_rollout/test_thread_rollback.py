import pytest

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from sessions_app.codex_rollout import (
    ThreadRollbackError,
    drop_last_user_turns,
    plan_thread_rollback,
    rollback_turns,
)

PERM = "<permissions instructions>\nsandbox: workspace-write\n</permissions instructions>"
ENV = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"
AGENTS = "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"


def assistant(text):
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def developer(*texts):
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": t} for t in texts]}


def summary(text):
    return user_message(SUMMARY_PREFIX + "\n" + text)


@pytest.mark.parametrize("num_turns", [0, -1])
def test_num_turns_below_one_is_refused_with_codex_message(num_turns):
    with pytest.raises(ThreadRollbackError) as info:
        rollback_turns([user_message("a")], num_turns)

    assert str(info.value) == "num_turns must be >= 1"
    assert info.value.codex_error_info == "thread_rollback_failed"


def test_non_integer_num_turns_is_refused():
    with pytest.raises(ThreadRollbackError, match="num_turns must be an integer"):
        rollback_turns([user_message("a")], True)


def test_drops_the_last_n_user_turns_with_everything_after_them():
    history = [user_message("a"), assistant("1"), user_message("b"), assistant("2"), user_message("c"), assistant("3")]

    assert rollback_turns(history, 1) == history[:4]
    assert rollback_turns(history, 2) == history[:2]


def test_more_turns_than_exist_keeps_everything_before_the_first_user_message():
    prefix = [developer(PERM), user_message(ENV), user_message(AGENTS)]
    history = [*prefix, user_message("a"), assistant("1"), user_message("b")]

    assert rollback_turns(history, 5) == prefix
    assert rollback_turns(history, 2) == prefix


def test_history_without_user_turns_is_unchanged():
    history = [developer(PERM), assistant("hello")]

    assert rollback_turns(history, 1) == history


def test_injected_context_run_directly_above_the_cut_is_removed():
    history = [
        user_message("a"), assistant("1"),
        developer("<model_switch>\nnow gpt-5.2\n</model_switch>"),
        developer("<collaboration_mode>plan</collaboration_mode>"),
        user_message(ENV),
        user_message("b"), assistant("2"),
    ]
    result = plan_thread_rollback(history, 1)

    assert result.history == [user_message("a"), assistant("1")]
    assert result.cut_index == 2
    assert result.removed_count == 5
    # No injected context survives the cut: the next turn must re-inject it (post-#15577 shape).
    assert result.clears_baseline is True


def test_dropping_injected_context_keeps_the_baseline_when_the_surviving_history_still_carries_context():
    history = [developer(PERM), user_message(ENV), user_message("a"), assistant("1"),
               developer("<model_switch>\nnow gpt-5.2\n</model_switch>"), user_message("b"), assistant("2")]
    result = plan_thread_rollback(history, 1)

    assert result.history == history[:4]
    assert result.clears_baseline is False


def test_dropping_the_re_injected_context_after_a_compaction_clears_the_baseline():
    compaction = {"type": "compaction", "encrypted_content": "ENC"}
    history = [user_message("a"), compaction, developer(PERM), user_message(ENV), user_message("b"), assistant("2")]
    result = plan_thread_rollback(history, 1)

    assert result.history == [user_message("a"), compaction]
    assert result.clears_baseline is True


def test_trim_stops_at_the_first_item_that_is_not_injected_context():
    history = [user_message("a"), developer("Persistent note with no marker"), user_message(ENV), user_message("b")]

    assert rollback_turns(history, 1) == history[:2]


def test_trim_never_crosses_the_first_user_turn():
    # Injected items before the first user message are session prefix and survive even a full rollback.
    history = [developer(PERM), user_message(ENV), user_message("a"), developer(PERM), user_message("b")]

    assert rollback_turns(history, 1) == history[:3]
    assert rollback_turns(history, 2) == history[:2]


def test_trimmed_developer_message_mixing_injected_and_persistent_text_clears_the_baseline():
    mixed = developer(PERM, "You are working in the compactweb repository.")
    history = [user_message("a"), assistant("1"), mixed, user_message("b")]
    result = plan_thread_rollback(history, 1)

    assert result.history == [user_message("a"), assistant("1")]
    assert result.clears_baseline is True


def test_contextual_marker_match_is_case_insensitive_and_ignores_leading_space():
    history = [user_message("a"), developer("  <PERMISSIONS INSTRUCTIONS>x</PERMISSIONS INSTRUCTIONS>"),
               user_message("b")]

    assert rollback_turns(history, 1) == [user_message("a")]


def test_summary_and_kept_user_messages_of_a_replacement_history_count_as_turns():
    replacement = [user_message("old 1"), user_message("old 2"), summary("did things")]
    history = [*replacement, developer(PERM), user_message(ENV), user_message("new"), assistant("done")]

    assert rollback_turns(history, 1) == replacement
    assert rollback_turns(history, 2) == replacement[:2]
    assert rollback_turns(history, 3) == replacement[:1]
    assert rollback_turns(history, 4) == []


def test_hook_prompt_above_the_cut_is_trimmed_as_injected_context():
    hook = user_message('<hook_prompt hook_run_id="r1">check style</hook_prompt>')
    history = [user_message("a"), hook, user_message("b")]

    assert rollback_turns(history, 1) == [user_message("a")]


def test_replay_drop_with_zero_turns_is_a_no_op():
    history = [user_message("a"), assistant("1")]
    result = drop_last_user_turns(history, 0)

    assert result.history == history
    assert result.removed_count == 0


def test_rollback_does_not_mutate_its_input():
    history = [user_message("a"), assistant("1"), user_message("b")]
    snapshot = [dict(item) for item in history]
    rollback_turns(history, 1)

    assert history == snapshot
