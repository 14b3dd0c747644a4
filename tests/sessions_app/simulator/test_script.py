import pytest

from sessions_app.simulator.scenarios import ModelSwitch, Pause, SetFaults, load_scenario, parse_scenario
from sessions_app.simulator.script import Pacing, ScenarioFinished, ScenarioRun, next_step_at


def small_scenario(**extra):
    data = {
        "name": "tiny", "title": "Tiny", "model": "big", "context_window": 1000,
        "context": {"cwd": "/home/dev/app", "agents_md": "x"},
        "tools": {"shell": {}},
        "turns": [
            {"user": "first about apples"},
            {"user": "second", "events": [{"type": "model_switch", "model": "small", "context_window": 100},
                                          {"type": "pause", "seconds": 30}]},
            {"user": "third", "events": [{"type": "faults", "faults": ["overloaded;times=2"], "scope": "compaction"}]},
        ],
        **extra,
    }
    return parse_scenario(data, "tiny.toml")


def test_run_yields_inputs_in_order_then_finishes():
    run = ScenarioRun(small_scenario(), seed=1)
    assert [s.user_input for s in run] == ["first about apples", "second", "third"]
    assert run.finished and run.peek() is None
    with pytest.raises(ScenarioFinished):
        run.advance()


def test_model_switch_and_fault_events_come_at_their_turns():
    run = ScenarioRun(small_scenario(), seed=1)
    steps = list(run)
    assert steps[0].events == () and steps[0].model_switch is None
    assert steps[1].model_switch == ModelSwitch("small", 100)
    assert steps[1].pause_seconds == 30
    assert steps[2].fault_plan == SetFaults(("overloaded;times=2",), "compaction")
    assert steps[2].fault_plan.header_value() == "overloaded;times=2"


def test_shipped_downshift_scenario_switches_model_at_the_scripted_turn():
    scenario = load_scenario("model-downshift")
    run = ScenarioRun(scenario, seed=9)
    switched = [(s.number, s.model_switch) for s in run if s.model_switch]
    assert switched == [(3, ModelSwitch("gpt-5.1-codex-mini", 32000))]


def test_looping_repeats_with_substitutions_and_restores_model_and_faults():
    scenario = small_scenario(loop={"substitutions": {"apples": ["pears", "plums"]}})
    run = ScenarioRun(scenario, seed=3, loop=True)
    steps = [run.advance() for _ in range(9)]
    assert not run.finished
    assert [s.iteration for s in steps] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert steps[0].user_input == "first about apples"
    assert steps[3].user_input in ("first about pears", "first about plums")
    # Each repeat starts on the original model with no faults, so the switch and the faults happen again.
    assert steps[3].events == (ModelSwitch("big", 1000), SetFaults(()))
    assert steps[4].model_switch == ModelSwitch("small", 100)


def test_same_seed_same_script_different_seed_may_differ():
    scenario = load_scenario("log-spelunking")
    a = [ScenarioRun(scenario, seed=1, loop=True).step(n) for n in range(14)]
    b = [ScenarioRun(scenario, seed=1, loop=True).step(n) for n in range(14)]
    assert a == b
    c = [ScenarioRun(scenario, seed=2, loop=True).step(n) for n in range(14)]
    assert [s.user_input for s in a] != [s.user_input for s in c]


def test_a_paste_turn_appends_a_log_of_the_drawn_size():
    from compaction_app.engine.tokens import counter

    scenario = load_scenario("log-spelunking")
    index = next(i for i, t in enumerate(scenario.turns) if t.paste is not None)
    step = ScenarioRun(scenario, seed=1).step(index)
    assert step.user_input.startswith(scenario.turns[index].user + "\n\n```\n")
    tokens = counter("o200k_base").count_text(step.user_input)
    assert 6000 <= tokens <= 14_300


def test_state_round_trip_resumes_at_the_same_turn():
    run = ScenarioRun(load_scenario("many-short-turns"), seed="x", loop=True, pacing=Pacing(6))
    run.advance(now=100.0)
    run.turn_finished(105.0)
    again = ScenarioRun.from_state(run.state())
    assert again.state() == run.state()
    assert again.peek() == run.peek()


def test_next_step_at_as_fast_as_possible_is_now():
    run = ScenarioRun(small_scenario(), seed=1)
    assert run.next_step_at(50.0) == 50.0
    run.advance(now=50.0)
    run.turn_finished(51.0)
    # Turn 1 carries a 30 s pause counted from the end of turn 0.
    assert run.next_step_at(52.0) == 81.0
    run.advance(now=81.0)
    assert run.next_step_at(90.0) == 90.0
    run.advance(now=90.0)
    assert run.next_step_at(95.0) is None


def test_pacing_spaces_turn_starts():
    pacing = Pacing(turns_per_minute=4)
    assert next_step_at(10.0, pacing=pacing, last_started_at=None, last_finished_at=None) == 10.0
    assert next_step_at(12.0, pacing=pacing, last_started_at=10.0, last_finished_at=11.0) == 25.0
    assert next_step_at(40.0, pacing=pacing, last_started_at=10.0, last_finished_at=11.0) == 40.0
    assert next_step_at(12.0, pacing=pacing, last_started_at=10.0, last_finished_at=11.0, pause_seconds=60) == 71.0


def test_pause_before_the_first_turn_counts_from_creation():
    assert next_step_at(5.0, pacing=Pacing(), last_started_at=None, last_finished_at=None,
                        pause_seconds=10, created_at=0.0) == 10.0


def test_invalid_pacing_is_refused():
    with pytest.raises(ValueError):
        Pacing(turns_per_minute=0)


def test_pause_event_type_is_exposed():
    assert Pause(3.0).type == "pause"


def test_a_step_is_computed_once_per_run_object_and_is_what_a_fresh_run_computes(monkeypatch):
    run = ScenarioRun(small_scenario(), seed=3, loop=True)
    computed = []
    compute = run._compute_step
    monkeypatch.setattr(run, "_compute_step", lambda n: computed.append(n) or compute(n))
    first = run.peek()
    assert run.advance() is first and run.next_step_at(0.0) is not None
    assert computed == [0, 1]  # peeked, taken, then the next one asked when it is due
    assert first == ScenarioRun(small_scenario(), seed=3, loop=True).step(0)
    run.loop = False
    assert run.step(3) is None  # a changed run computes afresh
