from compaction_app.engine.items import (
    is_contextual_user_message,
    is_real_user_message,
    is_user_turn_boundary,
    message_text,
)
from sessions_app.simulator.initial_context import (
    ContextWindowIds,
    agents_md_message,
    environment_context_message,
    initial_context_items,
    permissions_message,
)
from sessions_app.simulator.scenarios import list_scenarios, load_scenario


def test_agents_md_and_environment_context_are_contextual_not_real_user_messages():
    for item in (agents_md_message("/home/dev/app", "Run the tests."), environment_context_message("/home/dev/app")):
        assert is_contextual_user_message(item)
        assert not is_real_user_message(item)
        assert not is_user_turn_boundary(item)


def test_messages_have_the_codex_shapes():
    agents = message_text(agents_md_message("/home/dev/app", "  Run the tests.\n"))
    assert agents == "# AGENTS.md instructions for /home/dev/app\n\n<INSTRUCTIONS>\nRun the tests.\n</INSTRUCTIONS>"
    env = message_text(environment_context_message("/home/dev/app", "bash"))
    assert env == "<environment_context>\n  <cwd>/home/dev/app</cwd>\n  <shell>bash</shell>\n</environment_context>"
    perms = permissions_message("be careful")
    assert perms["role"] == "developer"
    assert message_text(perms) == "<permissions instructions>\nbe careful\n</permissions instructions>"


def test_every_shipped_scenario_seeds_developer_then_contextual_user_messages():
    for name in list_scenarios():
        scenario = load_scenario(name)
        ids = ContextWindowIds("thread-1", "w1", "w1") if scenario.token_budget else None
        items = scenario.initial_context(ids)
        assert items[0]["role"] == "developer"
        assert message_text(items[0]).startswith("<permissions instructions>")
        users = [i for i in items if i["role"] == "user"]
        assert len(users) == 2
        assert all(is_contextual_user_message(u) and not is_real_user_message(u) for u in users)
        assert f"<cwd>{scenario.cwd}</cwd>" in message_text(users[1])


def test_context_window_block_lists_ids_and_omits_previous_in_the_first_window():
    first = initial_context_items(cwd="/a", agents_md="x", window_ids=ContextWindowIds("t", "w1", "w1"))
    block = message_text(first[1])
    assert first[1]["role"] == "developer"
    assert block.startswith("<context_window>") and block.endswith("</context_window>")
    assert "Thread id: t" in block and "First window id: w1" in block and "Current window id: w1" in block
    assert "Previous window id" not in block

    later = initial_context_items(cwd="/a", agents_md="x", window_ids=ContextWindowIds("t", "w1", "w3", "w2"))
    assert "Previous window id: w2" in message_text(later[1])
    assert "Current window id: w3" in message_text(later[1])


def test_without_window_ids_there_is_no_context_window_block():
    items = initial_context_items(cwd="/a", agents_md="x")
    assert [i["role"] for i in items] == ["developer", "user", "user"]
    assert all("<context_window>" not in message_text(i) for i in items)
