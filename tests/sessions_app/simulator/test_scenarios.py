import textwrap

import pytest

from sessions_app.simulator.errors import ScenarioError
from sessions_app.simulator.scenarios import (
    ModelSwitch,
    SetFaults,
    UnknownScenario,
    list_scenarios,
    load_scenario,
    load_scenario_file,
)

REQUIRED = {
    "fix-failing-test", "large-refactor", "log-spelunking", "many-short-turns", "model-downshift",
    "provider-overloaded-during-compaction",
}

VALID = """
name = "{name}"
title = "A test scenario"
model = "big"
context_window = 1000

[context]
cwd = "/home/dev/app"
agents_md = "Run the tests."

[tools.shell]
output = {{ kind = "fixed", value = 100 }}

[[turns]]
user = "hello"
"""


def write(tmp_path, text, name="broken"):
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_the_library_ships_the_required_scenarios_and_every_one_loads():
    names = list_scenarios()
    assert REQUIRED <= set(names)
    for name in names:
        scenario = load_scenario(name)
        assert scenario.name == name
        assert scenario.turns and scenario.tools and scenario.title
        assert scenario.tool_specs()


def test_a_valid_file_loads_with_defaults(tmp_path):
    scenario = load_scenario_file(write(tmp_path, VALID.format(name="ok"), "ok"))
    assert scenario.source == "ok.toml"
    assert scenario.shell == "bash"
    assert scenario.turns[0].user == "hello" and scenario.turns[0].events == ()
    assert list(scenario.tools) == ["shell"]


def test_model_downshift_switches_to_a_smaller_window_mid_session():
    scenario = load_scenario("model-downshift")
    switches = [(i, e) for i, t in enumerate(scenario.turns) for e in t.events if isinstance(e, ModelSwitch)]
    assert len(switches) == 1
    index, switch = switches[0]
    assert index > 0
    assert switch.model != scenario.model
    assert switch.context_window < scenario.context_window


def test_overloaded_scenario_targets_compaction_requests_and_clears_them_later():
    scenario = load_scenario("provider-overloaded-during-compaction")
    plans = [e for t in scenario.turns for e in t.events if isinstance(e, SetFaults)]
    assert plans[0].header_value() == "overloaded;times=2" and plans[0].scope == "compaction"
    assert plans[-1].faults == ()


def test_token_budget_scenario_offers_new_context_and_needs_window_ids():
    scenario = load_scenario("token-budget-long-task")
    assert scenario.token_budget and "new_context" in scenario.tools
    with pytest.raises(ValueError, match="window_ids"):
        scenario.initial_context()


def test_unknown_scenario_name_lists_the_library():
    with pytest.raises(UnknownScenario, match="fix-failing-test"):
        load_scenario("no-such-thing")
    with pytest.raises(UnknownScenario):
        load_scenario("../etc/passwd")


@pytest.mark.parametrize(
    ("old", "new", "field", "problem"),
    [
        ('title = "A test scenario"\n', "", "title", "is required"),
        ('cwd = "/home/dev/app"', 'cwd = "relative/dir"', "context.cwd", "absolute path"),
        ('user = "hello"', "user = 3", "turns[0].user", "non-empty string"),
        ('user = "hello"', 'user = "hi"\nevents = [{ type = "teleport" }]', "turns[0].events[0].type", "model_switch"),
        ('user = "hello"', 'user = "hi"\nevents = [{ type = "model_switch", model = "small" }]',
         "turns[0].events[0].context_window", "is required"),
        ('user = "hello"', 'user = "hi"\nevents = [{ type = "faults", faults = ["over loaded!"] }]',
         "turns[0].events[0].faults[0]", "name;key=value"),
        ('user = "hello"', 'user = "hi"\nevents = [{ type = "pause", seconds = -2 }]',
         "turns[0].events[0].seconds", "seconds"),
        ("[tools.shell]", "[tools.telnet]", "tools.telnet", "unknown tool"),
        ("[tools.shell]", "[tools.shell]\nfailure_rate = 2", "tools.shell.failure_rate", "0..1"),
        ("[tools.shell]", "[tools.new_context]\n[tools.shell]", "tools.new_context", "token_budget"),
        ('value = 100', 'value = "lots"', "tools.shell.output.value", "integer"),
        ('title = "A test scenario"', 'title = "A test scenario"\ncolour = "red"', "colour", "not a known field"),
        ('model = "big"\ncontext_window = 1000\n', "",
         "model", "model_switch"),
    ],
)
def test_a_broken_scenario_names_the_file_and_the_field(tmp_path, old, new, field, problem):
    text = VALID.format(name="broken")
    if field == "model":  # needs a model switch to be wrong
        text = text.replace('user = "hello"', 'user = "hi"\nevents = [{ type = "model_switch", model = "s", '
                                               "context_window = 10 }]")
    assert old in text
    path = write(tmp_path, text.replace(old, new))
    with pytest.raises(ScenarioError) as err:
        load_scenario_file(path)
    assert err.value.source == "broken.toml"
    assert err.value.field == field
    assert "broken.toml" in str(err.value) and field in str(err.value) and problem in str(err.value)


def test_invalid_toml_names_the_file(tmp_path):
    with pytest.raises(ScenarioError, match=r"broken\.toml.*not valid TOML"):
        load_scenario_file(write(tmp_path, 'name = "broken\n'))


def test_the_name_must_match_the_file_name(tmp_path):
    with pytest.raises(ScenarioError) as err:
        load_scenario_file(write(tmp_path, VALID.format(name="other"), "mine"))
    assert err.value.field == "name" and "mine.toml" in str(err.value)
