"""Fleet control: starting sessions from scenarios, pacing claims, pause / resume / stop, and one step's events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from compaction_app.models import AuditEntry, Compaction, CompactionAttempt, CompactionPolicy, Provider
from compaction_app.records import STALE_ATTEMPT_MESSAGE
from sessions_app.fleet import runtime as fleet
from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout import lease as locks
from sessions_app.rollout.services import do_append_items
from sessions_app.simulator import SetFaults, load_scenario

pytestmark = pytest.mark.django_db


def start(provider, policy, **kwargs):
    kwargs.setdefault("scenario", "many-short-turns")
    kwargs.setdefault("count", 1)
    return fleet.do_start_fleet(provider=provider, policy=policy, **kwargs)


def test_start_fleet_creates_numbered_sessions_with_the_scenario_context_and_due_runs(provider, policy):
    runs = start(provider, policy, count=3, seed=40, now=1_000.0)

    scenario = load_scenario("many-short-turns")
    assert [r.session.title for r in runs] == [f"{scenario.title} #{n}" for n in (1, 2, 3)]
    assert [r.seed for r in runs] == [40, 41, 42]
    for run in runs:
        session = run.session
        assert session.base_instructions == scenario.base_instructions
        assert session.initial_context == scenario.initial_context()
        assert not session.reference_context_set  # the first turn injects it (spec §5.3)
        assert session.state == Session.State.RUNNING
        assert run.status == SimulatorRun.Status.RUNNING and run.next_step_at.timestamp() == 1_000.0
        assert run.state["position"] == 0 and run.state["base_provider"] == provider.pk
    # The scenario suggests a 24k window: the sessions run on a derived row of the chosen provider.
    assert runs[0].session.provider.context_window == 24_000
    assert runs[0].session.provider.base_url == provider.base_url and runs[0].session.provider.model == "sim-1"


def test_an_explicit_window_wins_and_a_model_switching_scenario_starts_on_its_model(provider, policy):
    plain = start(provider, policy, context_window=12_000)[0]
    switching = start(provider, policy, scenario="model-downshift")[0]

    assert plain.session.provider.context_window == 12_000
    assert (switching.session.provider.model, switching.session.provider.context_window) == ("gpt-5.1-codex", 128_000)
    assert Provider.objects.filter(name__startswith=provider.name).count() == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scenario": "no-such"}, "unknown scenario"),
        ({"count": 0}, "count"),
        ({"count": fleet.MAX_FLEET_SIZE + 1}, "count"),
        ({"turns_per_minute": 0}, "turns_per_minute"),
        ({"context_window": 10}, "context_window"),
    ],
)
def test_bad_fleet_requests_are_refused_and_create_nothing(provider, policy, kwargs, message):
    with pytest.raises(fleet.FleetError, match=message):
        start(provider, policy, **kwargs)
    assert not Session.objects.exists() and not SimulatorRun.objects.exists()


def test_claims_hand_out_each_due_step_once_oldest_first(provider, policy):
    first, second = start(provider, policy, count=2, now=100.0)
    SimulatorRun.objects.filter(pk=second.pk).update(next_step_at=fleet._dt(50.0))

    assert fleet.claim_due_runs(now=100.0) == [second.session_id, first.session_id]
    assert fleet.claim_due_runs(now=100.0) == []  # claimed for CLAIM_SECONDS
    # A claim that was never followed by a step (a dead worker) expires.
    assert sorted(fleet.claim_due_runs(now=100.0 + fleet.CLAIM_SECONDS)) == sorted([first.session_id,
                                                                                    second.session_id])


def test_a_paced_fleet_spreads_its_first_steps_over_one_interval(provider, policy):
    runs = start(provider, policy, count=4, turns_per_minute=6, now=1_000.0)  # an interval of 10 s
    assert [r.next_step_at.timestamp() for r in runs] == [1_000.0, 1_002.5, 1_005.0, 1_007.5]
    assert fleet.claim_due_runs(now=1_004.0) == [r.session_id for r in runs[:2]]


def test_pacing_makes_the_next_step_due_one_interval_after_the_last_start(provider, policy):
    run = start(provider, policy, turns_per_minute=6, now=1_000.0)[0]
    clock = iter([1_000.0, 1_003.0])

    result = async_to_sync(fleet.arun_step)(session_id=run.session_id, clock=lambda: next(clock))
    assert result.status == "ran"
    run.refresh_from_db()
    assert run.steps_done == 1 and run.state["position"] == 1
    assert run.next_step_at.timestamp() == 1_010.0  # start-to-start: 60 / 6 seconds
    assert fleet.claim_due_runs(now=1_009.0) == [] and fleet.claim_due_runs(now=1_010.0) == [run.session_id]


def test_pause_resume_stop_change_the_run_and_mirror_it_on_the_session(provider, policy):
    run = start(provider, policy)[0]

    assert fleet.do_pause_run(run=run) == 1
    run.refresh_from_db()
    assert (run.status, run.session.state) == ("paused", "paused")
    assert fleet.claim_due_runs(now=timezone.now().timestamp() + 10) == []
    assert fleet.do_run_step(session_id=run.session_id).status == "skipped"

    assert fleet.do_resume_run(run=run.pk, now=5_000.0) == 1
    run.refresh_from_db()
    assert (run.status, run.session.state, run.next_step_at.timestamp()) == ("running", "running", 5_000.0)

    assert fleet.do_stop_run(run=run) == 1
    run.refresh_from_db()
    assert (run.status, run.session.state) == ("stopped", "stopped")
    with pytest.raises(fleet.FleetError, match="run .* is stopped; only paused runs can be resumed"):
        fleet.do_resume_run(run=run)
    with pytest.raises(fleet.FleetError, match="does not exist"):
        fleet.do_pause_run(run=987654)


def test_actions_without_a_run_apply_to_every_run_in_the_right_state(provider, policy):
    runs = start(provider, policy, count=3)
    fleet.do_stop_run(run=runs[0])

    assert fleet.do_pause_run() == 2
    assert fleet.do_resume_run() == 2
    assert fleet.do_stop_run() == 2
    assert set(SimulatorRun.objects.values_list("status", flat=True)) == {"stopped"}


def test_a_non_looping_run_finishes_after_its_last_turn(provider, policy):
    run = start(provider, policy, scenario="token-budget-long-task")[0]
    turns = len(load_scenario("token-budget-long-task").turns)
    SimulatorRun.objects.filter(pk=run.pk).update(state={**run.state, "position": turns - 1})

    assert fleet.do_run_step(session_id=run.session_id).status == "ran"
    run.refresh_from_db()
    assert (run.status, run.next_step_at, run.session.state) == ("finished", None, "idle")
    assert fleet.do_run_step(session_id=run.session_id).status == "skipped"


def test_a_step_whose_worker_died_before_saving_it_is_never_run_a_second_time(provider, policy):
    run = start(provider, policy)[0]
    saved_before = SimulatorRun.objects.get(pk=run.pk).state
    assert fleet.do_run_step(session_id=run.session_id).status == "ran"
    # The worker died after the turn was written and before the step was saved: the run's state is the old one.
    SimulatorRun.objects.filter(pk=run.pk).update(state=saved_before, steps_done=0)

    assert fleet.do_run_step(session_id=run.session_id).step == 1

    steps = [line.payload["step"] for line in RolloutLine.objects.filter(
        session_id=run.session_id, kind="turn_context", payload__has_key="step").order_by("seq")]
    assert steps == [0, 1]
    assert SimulatorRun.objects.get(pk=run.pk).steps_done == 2


def test_a_step_right_after_a_saved_one_reads_no_rollout_and_a_later_death_is_still_found(provider, policy,
                                                                                          monkeypatch):
    run = start(provider, policy)[0]
    assert fleet.do_run_step(session_id=run.session_id).status == "ran"
    saved = SimulatorRun.objects.get(pk=run.pk).state
    assert saved[fleet.SAVED_LAST_SEQ] == Session.objects.get(pk=run.session_id).last_seq
    checks = []
    step_started = fleet._step_started
    monkeypatch.setattr(fleet, "_step_started", lambda *a: checks.append(a) or step_started(*a))

    assert fleet.do_run_step(session_id=run.session_id).step == 1
    assert checks == []  # nothing was written since step 0 was saved: step 1 cannot have begun
    # step 1's worker "died" after its turn and before saving it: the rollout moved on, so it is looked for
    SimulatorRun.objects.filter(pk=run.pk).update(state=saved, steps_done=1)
    assert fleet.do_run_step(session_id=run.session_id).step == 2
    assert len(checks) == 1


def test_a_step_finds_its_session_busy_and_retries_shortly(provider, policy):
    run = start(provider, policy)[0]
    lease = locks.acquire(session_id=run.session_id, purpose="compaction")
    try:
        assert fleet.do_run_step(session_id=run.session_id).status == "busy"
    finally:
        locks.release(lease)
    run.refresh_from_db()
    assert run.steps_done == 0
    assert run.next_step_at > timezone.now()
    assert not RolloutLine.objects.filter(session_id=run.session_id, kind="turn_context").exists()


def test_a_step_taking_over_the_expired_lease_of_a_dead_compaction_marks_its_attempt_interrupted(provider, policy):
    run = start(provider, policy)[0]
    locks.acquire(session_id=run.session_id, purpose="compaction")  # the worker holding it was killed
    dead = CompactionAttempt.objects.create(
        session_id=run.session_id, trigger="auto", reason="context_limit", implementation="responses",
        phase="pre_turn", strategy="local", started_at=timezone.now() - timedelta(minutes=20),
    )
    Session.objects.filter(pk=run.session_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    assert fleet.do_run_step(session_id=run.session_id).status == "ran"
    dead.refresh_from_db()
    assert (dead.status, dead.error_message) == ("interrupted", STALE_ATTEMPT_MESSAGE)
    assert dead.completed_at is not None and dead.compaction_id is None
    assert Session.objects.get(pk=run.session_id).lease_holder == ""


def test_a_model_switch_applies_before_the_turn_so_the_pre_turn_check_downshifts_with_the_previous_model(
    provider, policy
):
    run = start(provider, policy, scenario="model-downshift", seed=3)[0]
    for _ in range(3):
        assert fleet.do_run_step(session_id=run.session_id).turn_status == "completed"
    session = Session.objects.get(pk=run.session_id)
    # Grow the history past the mini model's limit (90% of 32000) before the switching turn, still inside its
    # window: the compaction request goes to the session's provider with the previous model's name.
    big = "The invoice splits into ledger entries per currency and tax line. " * 2380
    do_append_items(session=session, items=[{"type": "message", "role": "assistant",
                                             "content": [{"type": "output_text", "text": big}]}])
    session.refresh_from_db()
    assert 28_800 < session.tokens_in_window < 31_000

    step = fleet.do_run_step(session_id=run.session_id)

    assert step.turn_status == "completed", step
    session.refresh_from_db()
    assert (session.provider.model, session.provider.context_window) == ("gpt-5.1-codex-mini", 32_000)
    compaction = Compaction.objects.get(session=session)
    assert (compaction.reason, compaction.phase, compaction.trigger) == ("model_downshift", "pre_turn", "auto")
    assert AuditEntry.objects.get(compaction=compaction).detail["model"] == "gpt-5.1-codex"
    contexts = list(RolloutLine.objects.filter(session=session, kind="turn_context", payload__has_key="step")
                    .order_by("seq").values_list("payload", flat=True))
    assert [c["model"] for c in contexts] == ["gpt-5.1-codex"] * 3 + ["gpt-5.1-codex-mini"]
    assert contexts[-1]["context_window"] == 32_000
    compacted = RolloutLine.objects.get(session=session, kind="compacted")
    assert compacted.seq < RolloutLine.objects.filter(session=session, kind="turn_context").order_by("-seq")[0].seq


def test_fault_plans_get_a_per_session_counter_key_and_compaction_scope_spares_the_turns_own_requests(
    provider, policy
):
    plan = SetFaults(("overloaded;times=2", "slow=0.5", "server_error;times=1;key=shared"), "compaction")
    assert fleet.session_fault_spec(plan, session_id=7, step=3) == (
        "overloaded;times=2;key=s7t3, slow=0.5, server_error;times=1;key=shared")

    run = start(provider, policy, scenario="provider-overloaded-during-compaction")[0]
    scenario = load_scenario("provider-overloaded-during-compaction")
    index = next(i for i, t in enumerate(scenario.turns) if t.events)
    SimulatorRun.objects.filter(pk=run.pk).update(state={**run.state, "position": index})

    assert fleet.do_run_step(session_id=run.session_id).turn_status == "completed"
    session = Session.objects.get(pk=run.session_id)
    assert session.fault_injection == {"fault": f"overloaded;times=2;key=s{session.pk}t{index}"}
    run.refresh_from_db()
    assert run.state["fault_scope"] == "compaction"
    assert fleet._sampling_faults(session, run.state) == {}


def test_the_demo_fleet_is_seeded_once_with_a_token_budget_policy_for_the_token_budget_scenario(provider, policy):
    runs = fleet.seed_demo_fleet(provider=provider, policy=policy)

    assert sorted(r.scenario for r in runs) == sorted(fleet.DEMO_FLEET)
    assert all(r.loop and r.turns_per_minute == 6 for r in runs)
    budget = next(r for r in runs if r.scenario == "token-budget-long-task")
    assert budget.session.policy == CompactionPolicy.objects.get(name="token-budget")
    assert budget.session.policy.token_budget
    assert fleet.seed_demo_fleet(provider=provider, policy=policy) == []
    assert SimulatorRun.objects.count() == len(fleet.DEMO_FLEET)
