"""Fleet control: simulated sessions started from scenarios, paced, paused, resumed and stopped (issue 5).

A SimulatorRun drives one session through its scenario script (`sessions_app.simulator.ScenarioRun`, saved in
`run.state`). One *step* is one turn of that session, run by `arun_step` under the session's lease, so steps never
overlap with each other or with a compaction of the same session. Who runs steps is the scheduler's business
(`sessions_app.fleet.scheduler`: in-process, or Celery tasks with a broker); it finds due runs with `claim_due_runs`.

Scenario events apply before their turn (spec §2.4: the previous-model check then sees a model switch):
- `model_switch`: the session moves to a Provider row like the run's base provider but with that model and window
  (created once, named "<base> · <model> · <window>"), so every reader of the session's provider (thresholds,
  compaction settings, the dashboard) sees the new window;
- `faults`: `session.fault_injection = {"fault": "<spec>, ..."}` (the simulated provider's X-Sim-Fault header);
  counted faults get a per-session, per-turn counter key so sessions do not share counts. Scope `compaction` keeps
  the faults off the turn's own requests: only compaction requests carry them;
- `pause`: handled by the pacing (the next step is due that much later).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.db import DatabaseError, transaction
from django.db.models import F
from uuid6 import uuid7

from compaction_app.config_services import derived_provider
from compaction_app.models import CompactionPolicy, Provider
from compactweb import db_outage, metrics, statements
from compactweb.domain_errors import Conflict, Invalid
from sessions_app.compactions.queue import has_queued
from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout import events, selectors
from sessions_app.rollout import lease as locks
from sessions_app.rollout.services import do_create_session
from sessions_app.simulator import (
    ContextWindowIds,
    ModelSwitch,
    Pacing,
    Scenario,
    ScenarioRun,
    SetFaults,
    TurnStep,
    list_scenarios,
    load_scenario,
)
from sessions_app.turns.ends import end_open_turn
from sessions_app.turns.services import TurnScript, arun_turn

logger = logging.getLogger(__name__)

MAX_FLEET_SIZE = 200
MAX_TURNS_PER_MINUTE = 6000.0
# A claimed step is not handed out again for this long (a worker that died frees it after that).
CLAIM_SECONDS = 120.0
# A step that found its session busy (a manual compaction, an API turn) tries again after this.
BUSY_RETRY_SECONDS = 1.0
INTERRUPTED = "interrupted"
STEP_LEASE_PURPOSE = "turn"
STEP_LOOKBACK_LINES = 2_000  # how far back a started step's turn_context is looked for (an indexed seq range)
# In a run's state: the newest rollout seq of the turn its last saved step ran (0: the turn wrote nothing).
SAVED_LAST_SEQ = "turn_last_seq"
# Every step reads its run, saves it and is claimed once: statements written once (compactweb.statements), since
# the ORM took several times the statements to build them.
_RUN_OF_SESSION = statements.Select(SimulatorRun, where=("session",))
_SAVE_STEP = statements.Update(SimulatorRun, set=("state", "last_error", "next_step_at"), add=("steps_done",),
                               where=("pk",))
_CLAIM = statements.Update(SimulatorRun, set=("next_step_at",), where=("pk", "status", "next_step_at"))
DEMO_FLEET = ("many-short-turns", "fix-failing-test", "model-downshift", "token-budget-long-task")

Status = SimulatorRun.Status


class FleetError(Invalid, ValueError):
    """A fleet request that cannot be done (unknown scenario, bad count). Nothing changed."""


class RunStateRefused(Conflict, FleetError):
    """A run action on a run in the wrong state (or gone meanwhile). Nothing changed."""

    code = "invalid_state"


@dataclass(frozen=True)
class StepResult:
    session_id: int
    status: str  # ran | finished | busy | skipped | failed | interrupted (the database went away: due again)
    turn_status: str = ""
    error: str = ""
    step: int | None = None


def _dt(timestamp: float | None) -> datetime | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, tz=UTC)


def _starting_provider(scenario: Scenario, provider: Provider, context_window: int | None) -> Provider:
    """The provider row a new session starts on: the chosen provider with the window asked for, else the window
    the scenario suggests (its outputs are sized for it), else the provider's own. A script that switches models
    also starts on its declared model, so the switch means what the scenario says."""
    model = scenario.model if scenario.model_switches and scenario.model else provider.model
    window = context_window or scenario.context_window or provider.context_window
    return derived_provider(provider, model=model, context_window=window)


def _initial_context(scenario: Scenario, session: Session) -> list[dict]:
    ids = None
    if scenario.token_budget:
        ids = ContextWindowIds(
            thread_id=str(session.thread_id), first_window_id=session.first_window_id,
            current_window_id=session.window_id, previous_window_id=session.previous_window_id or None,
        )
    return scenario.initial_context(ids)


def _check_fleet_args(scenario: str, count: Any, turns_per_minute: Any) -> Scenario:
    if scenario not in list_scenarios():
        raise FleetError(f"scenario: unknown scenario {scenario!r}; choose one of {', '.join(list_scenarios())}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_FLEET_SIZE:
        raise FleetError(f"count: must be an integer from 1 to {MAX_FLEET_SIZE}, got {count!r}")
    if turns_per_minute is not None and (
        isinstance(turns_per_minute, bool) or not isinstance(turns_per_minute, int | float)
        or not 0 < turns_per_minute <= MAX_TURNS_PER_MINUTE
    ):
        raise FleetError(
            f"turns_per_minute: must be a number in (0, {MAX_TURNS_PER_MINUTE:g}] or empty for as fast as possible, "
            f"got {turns_per_minute!r}"
        )
    return load_scenario(scenario)


def do_start_fleet(
    *,
    scenario: str,
    count: int,
    provider: Provider,
    policy: CompactionPolicy,
    turns_per_minute: float | None = None,
    loop: bool = False,
    seed: int | None = None,
    context_window: int | None = None,
    actor=None,
    now: float | None = None,
) -> list[SimulatorRun]:
    """Create `count` sessions running `scenario` on `provider` / `policy` and their SimulatorRuns. Unpaced runs
    are due at once; paced ones spread their first steps over one interval (session i at i/count of it), and pacing
    being start to start keeps them spread, so a fleet does not step all together on every interval (1,000
    sessions at a pace made the whole fleet's steps one burst: bench_load --turns-per-minute).

    Sessions start on `provider` with the window `context_window`, else the scenario's suggested window, else the
    provider's (a differing window or model is a derived Provider row, see `derived_provider`). Session i is titled
    "<scenario title> #i", gets the scenario's base instructions and initial context (injected
    by its first turn, spec §5.3) and seed `seed + i` (a random base seed when none is given), so a fleet is
    reproducible. All or nothing: a bad argument raises FleetError and creates nothing.
    """
    loaded = _check_fleet_args(scenario, count, turns_per_minute)
    if context_window is not None and (
        isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1_000
    ):
        raise FleetError(f"context_window: must be an integer of at least 1000 tokens, got {context_window!r}")
    now = time.time() if now is None else now
    base_seed = random.SystemRandom().randrange(2**31) if seed is None else int(seed)
    existing = Session.objects.filter(title__startswith=f"{loaded.title} #").count()
    runs = []
    with transaction.atomic():
        start_provider = _starting_provider(loaded, provider, context_window)
        for i in range(count):
            session = do_create_session(
                title=f"{loaded.title} #{existing + i + 1}", provider=start_provider, policy=policy,
                base_instructions=loaded.base_instructions, actor=actor,
            )
            session.initial_context = _initial_context(loaded, session)
            session.state = Session.State.RUNNING
            session.save(update_fields=["initial_context", "state", "updated_at"])
            script = ScenarioRun(loaded, seed=base_seed + i, loop=loop, pacing=Pacing(turns_per_minute),
                                 created_at=now)
            state = {**script.state(), "base_provider": provider.pk, "fault_scope": "any"}
            runs.append(SimulatorRun.objects.create(
                session=session, scenario=loaded.name, seed=base_seed + i, loop=loop,
                turns_per_minute=turns_per_minute, status=Status.RUNNING, state=state,
                next_step_at=_dt(script.next_step_at(now + i * script.pacing.interval / count)), created_by=actor if getattr(actor, "pk", None) else None,
            ))
    return runs


def seed_demo_fleet(*, provider: Provider, policy: CompactionPolicy, actor=None) -> list[SimulatorRun]:
    """The demo fleet `scripts/dev` starts with: one looping session per demo scenario at 6 turns a minute.
    Idempotent: does nothing when any simulator run exists. The token-budget scenario gets a token-budget
    policy (created once) so its `new_context` calls open new windows (spec §4.4)."""
    if SimulatorRun.objects.exists():
        return []
    budget_policy, _ = CompactionPolicy.objects.get_or_create(name="token-budget", defaults={"token_budget": True})
    runs: list[SimulatorRun] = []
    for n, name in enumerate(DEMO_FLEET):
        runs += do_start_fleet(
            scenario=name, count=1, provider=provider,
            policy=budget_policy if load_scenario(name).token_budget else policy,
            turns_per_minute=6, loop=True, seed=1000 + n, actor=actor,
        )
    return runs


# --- pause / resume / stop ----------------------------------------------------------------------------------------

TRANSITIONS = {
    "pause": ((Status.RUNNING,), Status.PAUSED, Session.State.PAUSED),
    "resume": ((Status.PAUSED,), Status.RUNNING, Session.State.RUNNING),
    "stop": ((Status.RUNNING, Status.PAUSED), Status.STOPPED, Session.State.STOPPED),
}

PAST = {"pause": "paused", "resume": "resumed", "stop": "stopped"}


def _transition(action: str, run_id: int | None, now: float | None) -> int:
    allowed, target, session_state = TRANSITIONS[action]
    now = time.time() if now is None else now
    with transaction.atomic():
        runs = SimulatorRun.objects.select_for_update()
        if run_id is not None:
            run = runs.filter(pk=run_id).first()
            if run is None:
                raise RunStateRefused(f"simulator run {run_id} does not exist")
            if run.status not in allowed:
                raise RunStateRefused(f"run {run_id} is {run.status}; only {' or '.join(allowed)} runs can be {PAST[action]}")
            selected = runs.filter(pk=run_id)
        else:
            selected = runs.filter(status__in=allowed)
        session_ids = list(selected.values_list("session_id", flat=True))
        updates: dict[str, Any] = {"status": target}
        if target == Status.RUNNING:
            updates["next_step_at"] = _dt(now)  # a resumed run is due at once
        changed = SimulatorRun.objects.filter(session_id__in=session_ids, status__in=allowed).update(**updates)
        Session.objects.filter(pk__in=session_ids).update(state=session_state)
    _announce(action, session_ids)
    return changed


def _announce(action: str, session_ids: list[int]) -> None:
    """Tell every page watching these sessions that their run changed (no rollout line records it): the fleet
    board re-reads the rows and the session pages their run card, at once."""
    seqs = dict(Session.objects.filter(pk__in=session_ids).values_list("pk", "last_seq"))
    for session_id in session_ids:
        events.publish_transient(session_id=session_id, after_seq=seqs.get(session_id, 0), kind=f"run.{PAST[action]}",
                          detail={"action": action})


def _run_id(run: SimulatorRun | int | None) -> int | None:
    return run.pk if isinstance(run, SimulatorRun) else run


def do_pause_run(*, run: SimulatorRun | int | None = None, actor=None) -> int:
    """Pause one run (or every running run when `run` is None); a step in progress finishes first. Returns how
    many runs changed; a run that is not running raises FleetError."""
    return _transition("pause", _run_id(run), None)


def do_resume_run(*, run: SimulatorRun | int | None = None, actor=None, now: float | None = None) -> int:
    """Resume one paused run (or all of them); it is due at once."""
    return _transition("resume", _run_id(run), now)


def do_stop_run(*, run: SimulatorRun | int | None = None, actor=None) -> int:
    """Stop one running or paused run (or all of them) for good."""
    return _transition("stop", _run_id(run), None)


def pause_for_alert(sender, *, session_id: int, **kwargs) -> bool:
    """Pause the session's running run because an alert asked for it (the receiver of
    sessions_app.compactions.alerts.pause_requested); False when no run of that session is running."""
    run = SimulatorRun.objects.filter(session_id=session_id, status=SimulatorRun.Status.RUNNING).first()
    if run is None:
        return False
    try:
        return do_pause_run(run=run) > 0
    except FleetError:
        return False


# --- scheduling ---------------------------------------------------------------------------------------------------

def claim_due_runs(*, now: float | None = None, limit: int = 10) -> list[int]:
    """Session ids of running runs whose next step is due, claimed so no other scheduler hands them out again
    for CLAIM_SECONDS (a conditional update per run, safe across processes). Oldest due first."""
    now = time.time() if now is None else now
    due = list(
        SimulatorRun.objects.filter(status=Status.RUNNING, next_step_at__lte=_dt(now))
        .order_by("next_step_at", "pk")
        .values_list("pk", "session_id", "next_step_at")[:limit]
    )
    claimed = []
    for pk, session_id, at in due:
        if _CLAIM.run(values=(_dt(now + CLAIM_SECONDS),), where=(pk, Status.RUNNING, at)):
            claimed.append(session_id)
    return claimed


def release_claims(*, session_ids: list[int], now: float) -> int:
    """Make claimed runs due again at `now` (their step was never handed to anyone, e.g. the broker was down), so
    the next tick retries them instead of waiting out CLAIM_SECONDS. Only a claim made at `now` by
    `claim_due_runs(now=now)` is released; returns how many."""
    return SimulatorRun.objects.filter(
        session_id__in=session_ids, status=Status.RUNNING, next_step_at=_dt(now + CLAIM_SECONDS)
    ).update(next_step_at=_dt(now))


def release_claims_of_dead_holders(*, session_ids: list[int], now: float | None = None) -> int:
    """Make the runs of sessions whose lease holder died due now: a step that held the lease died with it, and
    its claim would otherwise keep the session still for the rest of CLAIM_SECONDS. Returns how many."""
    now = time.time() if now is None else now
    if not session_ids:
        return 0
    return SimulatorRun.objects.filter(
        session_id__in=session_ids, status=Status.RUNNING, next_step_at__gt=_dt(now)
    ).update(next_step_at=_dt(now))


def active_runs() -> int:
    """How many runs still have steps to take (running)."""
    return SimulatorRun.objects.filter(status=Status.RUNNING).count()


# --- one step -----------------------------------------------------------------------------------------------------

_KEYED = re.compile(r";\s*key=")


def session_fault_spec(faults: SetFaults, *, session_id: int, step: int) -> str:
    """The fault header value for one session: each counted fault gets its own key (`s<session>t<turn>`), so
    `times=n` counts this session's requests from this turn on, not the whole fleet's."""
    specs = []
    for spec in faults.faults:
        if ";times=" in spec and not _KEYED.search(spec):
            spec = f"{spec};key=s{session_id}t{step}"
        specs.append(spec)
    return ", ".join(specs)


def _apply_events(run: SimulatorRun, session: Session, step: TurnStep) -> tuple[Session, dict[str, Any]]:
    """Apply the step's model switch and fault plan before its turn; returns the session and the run state."""
    state = dict(run.state)
    fields = []
    switch: ModelSwitch | None = step.model_switch
    if switch is not None:
        base = Provider.objects.filter(pk=state.get("base_provider")).first() or session.provider
        target = derived_provider(base, model=switch.model, context_window=switch.context_window)
        if target.pk != session.provider_id:
            session.provider = target
            fields.append("provider")
    plan: SetFaults | None = step.fault_plan
    if plan is not None:
        spec = session_fault_spec(plan, session_id=session.pk, step=step.number)
        injection = {k: v for k, v in (session.fault_injection or {}).items() if k != "fault"}
        if spec:
            injection["fault"] = spec
        session.fault_injection = injection
        state["fault_scope"] = plan.scope
        fields.append("fault_injection")
    if fields:
        session.save(update_fields=[*fields, "updated_at"])
    return session, state


def _sampling_faults(session: Session, state: dict[str, Any]) -> dict[str, Any]:
    faults = dict(session.fault_injection or {})
    if state.get("fault_scope") == "compaction":
        faults.pop("fault", None)
    return faults


def claim_lapses_at(claimed_at: float) -> datetime:
    """The `next_step_at` a claim made at `claimed_at` wrote (`claim_due_runs`): a step sent with that claim
    runs only while the run still holds it."""
    return _dt(claimed_at + CLAIM_SECONDS)  # type: ignore[return-value]


def _prepare_step(session_id: int, now: float, claimed_at: float | None = None
                  ) -> tuple[SimulatorRun, Session, ScenarioRun, TurnStep | None, dict]:
    # Two plain reads: the session through the hand-written selector every turn uses, the run by its unique key.
    # One four-table select_related cost the ORM several times both queries to build (every step runs it).
    run = _RUN_OF_SESSION.get(where=(session_id,))
    run.session = selectors.get_session(session_id=session_id)
    if run.status != Status.RUNNING or not _holds_claim(run, claimed_at):
        return run, run.session, None, None, {}  # type: ignore[return-value]
    script = ScenarioRun.from_state(run.state)
    step = script.peek()
    if step is not None and not _nothing_written_since_saved(run) and _step_started(run.session, step.number):
        # The worker that ran this step died after its turn began and before the step was saved (SIGKILL, a lost
        # ack): a scenario step never runs a second turn, so it counts as done and the next one runs instead.
        script.advance(now=now)
        script.turn_finished(now)
        SimulatorRun.objects.filter(pk=run.pk).update(state={**run.state, **script.state()},
                                                      steps_done=F("steps_done") + 1)
        step = script.peek()
    if step is None:
        _finish(run, script, now)
        return run, run.session, script, None, {}
    session, state = _apply_events(run, run.session, step)
    script.advance(now=now)
    return run, session, script, step, state


def _holds_claim(run: SimulatorRun, claimed_at: float | None) -> bool:
    """Whether a step sent with the claim made at `claimed_at` (None: sent without one) may run. A claim that was
    offered again (its worker died, the broker went away) and claimed anew, or whose step already ran, no longer
    stands: its message, found late in a queue or delivered twice, runs nothing, and the step runs once."""
    return claimed_at is None or run.next_step_at == claim_lapses_at(claimed_at)


def _nothing_written_since_saved(run: SimulatorRun) -> bool:
    """Whether the session's newest line is still the newest line of the turn the last saved step ran: then no
    turn began since that save, and the step-started check needs no read of the rollout (the common case)."""
    saved = run.state.get(SAVED_LAST_SEQ)
    return isinstance(saved, int) and saved > 0 and saved == run.session.last_seq


def _step_started(session: Session, number: int) -> bool:
    """Whether the rollout already holds the turn of scenario step `number`: the newest step-numbered
    `turn_context` among the session's last lines names it (or a later step)."""
    recent = RolloutLine.objects.filter(session_id=session.pk, kind="turn_context",
                                        seq__gt=max(0, session.last_seq - STEP_LOOKBACK_LINES)).order_by("-seq")
    for payload in recent.values_list("payload", flat=True)[:8]:
        if isinstance(payload, dict) and isinstance(payload.get("step"), int):
            return payload["step"] >= number
    return False


def _finish(run: SimulatorRun, script: ScenarioRun, now: float) -> None:
    SimulatorRun.objects.filter(pk=run.pk, status=Status.RUNNING).update(status=Status.FINISHED, next_step_at=None)
    Session.objects.filter(pk=run.session_id, state=Session.State.RUNNING).update(state=Session.State.IDLE)


def _save_step(run: SimulatorRun, script: ScenarioRun, state: dict[str, Any], *, error: str, now: float,
               last_seq: int = 0) -> None:
    script.turn_finished(now)
    next_at = script.next_step_at(now)
    _SAVE_STEP.run(values=({**state, **script.state(), SAVED_LAST_SEQ: last_seq}, error[:2000], _dt(next_at)),
                   add=(1,), where=(run.pk,))
    if next_at is None:
        _finish(run, script, now)


def _busy(session_id: int, now: float, claimed_at: float | None = None) -> None:
    runs = SimulatorRun.objects.filter(session_id=session_id, status=Status.RUNNING)
    if claimed_at is not None:  # a stale message that found the session busy leaves the current claim alone
        runs = runs.filter(next_step_at=claim_lapses_at(claimed_at))
    runs.update(next_step_at=_dt(now + BUSY_RETRY_SECONDS))


def _failed(session_id: int, message: str) -> None:
    SimulatorRun.objects.filter(session_id=session_id).update(status=Status.FAILED, last_error=message[:2000])
    Session.objects.filter(pk=session_id).update(state=Session.State.FAILED)


@metrics.counted(metrics.STEPS, lambda result: result.status)
async def arun_step(*, session_id: int, clock=time.time, client=None, sleep=None,
                    claimed_at: float | None = None) -> StepResult:
    """Run the next turn of the session's scenario (under the session's lease) and save the run's progress.

    A turn that fails (provider down, a compaction failing) is recorded in the rollout and in `last_error`, and the
    script moves on; an unexpected error marks the run failed. `client` replaces the provider client (tests).
    `claimed_at`: the claim the step was sent with (`claim_due_runs(now=claimed_at)`); a claim that no longer
    stands runs nothing ("skipped", `_holds_claim`)."""
    try:
        # One trip to the database thread takes the lease and reads the step (run, session, provider, policy).
        lease, prepared = await sync_to_async(_acquire_and_prepare)(session_id, clock(), claimed_at)
    except locks.SessionBusy:
        await sync_to_async(_busy)(session_id, clock(), claimed_at)
        return StepResult(session_id, "busy")
    except _OutageAfterLease as exc:
        return await _interrupted(session_id, exc.lease, exc.__cause__, claimed_at)
    except Exception as exc:
        if not _interrupts(exc):
            raise
        return await _interrupted(session_id, None, exc, claimed_at)
    released = False
    # Named here so that an interrupted step ends its own turn and no other (`_resume_after_outage`).
    turn_id = str(uuid7())
    try:
        try:
            if prepared is None:
                return StepResult(session_id, "skipped", error="the session is not driven by the simulator")
            run, session, script, step, state = prepared
            if step is None:
                status = "finished" if script is not None else "skipped"
                return StepResult(session_id, status)
            tools = script.scenario.build_tools(seed=run.seed, counter_name=session.policy.counter_name(
                session.provider))
            number = step.number
            result = await arun_turn(
                session_id=session_id, user_input=step.user_input, lease=lease, session=session, client=client,
                turn_id=turn_id,
                script=TurnScript(
                    tools=tools, tool_rng=lambda call_id: script.rng_for("tool", number, call_id),
                    fault_injection=_sampling_faults(session, state), sleep=sleep,
                    turn_context={"cwd": script.scenario.cwd, "scenario": script.scenario.name, "step": number},
                ),
            )
            # Saving the step and giving the lease back are one trip too.
            await sync_to_async(_save_step_and_release)(run, script, state, error=result.error, now=clock(),
                                                        lease=lease, last_seq=result.last_seq)
            released = True
        except locks.LeaseLost as exc:
            # The lease expired and another holder took the session over (or the reaper freed it), ending this
            # step's turn; the turn's next write found that and wrote nothing. The run did nothing wrong: like a
            # busy session, it is due again in a moment (if this step's claim still stands).
            released = True  # not ours to give back
            logger.warning("simulator step of session %s lost its lease: %s", session_id, exc)
            await sync_to_async(_busy)(session_id, clock(), claimed_at)
            return StepResult(session_id, "busy", error=f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            if _interrupts(exc):
                released = True  # given back after the outage, or left to expire
                return await _interrupted(session_id, lease, exc, claimed_at, turn_id=turn_id)
            logger.exception("simulator step of session %s failed", session_id)
            await sync_to_async(_failed)(session_id, f"{type(exc).__name__}: {exc}")
            return StepResult(session_id, "failed", error=str(exc))
        return StepResult(session_id, "ran", turn_status=result.status, error=result.error, step=number)
    finally:
        if not released:
            await sync_to_async(locks.release)(lease)


def _interrupts(exc: BaseException) -> bool:
    """Whether `exc` cut the step short without the run doing anything wrong: the database went away, or rolled the
    step's transaction back for a conflict with another (a deadlock or serialization failure the write's own
    retries did not get past)."""
    return db_outage.is_unavailable(exc) or db_outage.is_conflict(exc)


async def _interrupted(session_id: int, lease: locks.Lease | None, exc: BaseException,
                       claimed_at: float | None = None, *, turn_id: str | None = None) -> StepResult:
    """The database went away (or stopped taking writes, or rolled a write back for a conflict) during the step:
    nothing is recorded as failed, since the run did nothing wrong. Once the database takes writes again (waited
    for as long as the step's claim stands, at least the lease's TTL: an outage longer than the TTL must not leave
    the session to wait out its claim, issue 42) the turn the step began is ended (an `error` line saying why and `turn_complete`,
    `turns/ends`), the lease given back and the run made due at once, so the session steps again right after an
    outage instead of staying claimed for CLAIM_SECONDS; that turn counts as done (`_prepare_step`) and never runs
    twice. "interrupted" when that worked, else "failed" (the lease then expires and the claim lapses; the next
    holder ends the turn)."""
    why = ("a conflicting transaction rolled its write back (deadlock or serialization failure)"
           if db_outage.is_conflict(exc) else "the database became unavailable")
    logger.warning("simulator step of session %s interrupted: %s (%s: %s)", session_id, why, type(exc).__name__, exc)
    resumed = await sync_to_async(_resume_after_outage)(session_id, lease, why, _resume_deadline(claimed_at),
                                                        turn_id=turn_id)
    return StepResult(session_id, INTERRUPTED if resumed else "failed", error=f"{type(exc).__name__}: {exc}")


def _resume_deadline(claimed_at: float | None) -> float:
    """How long (time.monotonic) an interrupted step waits for the database: until its claim lapses (past that the
    scheduler hands the run out again itself), and at least the lease's TTL."""
    stands = (claimed_at if claimed_at is not None else time.time()) + CLAIM_SECONDS - time.time()
    return time.monotonic() + max(stands, locks.lease_ttl().total_seconds())


def _resume_after_outage(session_id: int, lease: locks.Lease | None, why: str, deadline: float, *,
                         turn_id: str | None = None) -> bool:
    """Once the database takes writes: end the turn this step began (`turn_id`) if the step still holds its
    lease, give the lease back and make the run due. A step without a lease (cut before it took one, e.g. on a
    kept connection a database restart broke) began no turn and ends none: the session's open turn, if any, is
    another holder's, perhaps still being written (a message sent for an older claim reaches here before its
    claim is checked). A step whose lease was taken over ends none either: the taker ended its turn (issue 42:
    either gave a live turn a second `turn_complete`)."""
    while db_outage.wait_until_writable(deadline=deadline):
        try:
            with transaction.atomic():
                if lease is not None and turn_id is not None:
                    end_open_turn(session_id=session_id, why=why, holder=lease.holder, turn_id=turn_id)
                if lease is not None:
                    locks.release(lease)
                SimulatorRun.objects.filter(session_id=session_id, status=Status.RUNNING).update(
                    next_step_at=_dt(time.time()))
            return True
        except DatabaseError as exc:  # it went away again between the probe and the write, or a conflict
            if not _interrupts(exc):
                raise
            continue
    return False


def _acquire_and_prepare(session_id: int, now: float, claimed_at: float | None = None
                         ) -> tuple[locks.Lease, tuple | None]:
    if has_queued(session_id=session_id):  # an operator's compaction waits for the session: it goes first
        raise locks.SessionBusy(session_id=session_id, purpose="queued compaction")
    lease = locks.acquire(session_id=session_id, purpose=STEP_LEASE_PURPOSE)
    try:
        return lease, _prepare_step(session_id, now, claimed_at)
    except SimulatorRun.DoesNotExist:
        return lease, None
    except db_outage.UNAVAILABLE as exc:  # the lease cannot be given back now: after the outage
        raise _OutageAfterLease(lease) from exc
    except BaseException:
        locks.release(lease)
        raise


class _OutageAfterLease(Exception):
    """The database went away after the step took its lease (`_acquire_and_prepare`): the lease to give back."""

    def __init__(self, lease: locks.Lease) -> None:
        super().__init__(f"the database went away while session {lease.session_id} was leased")
        self.lease = lease


def _save_step_and_release(run: SimulatorRun, script: ScenarioRun, state: dict[str, Any], *, error: str, now: float,
                           lease: locks.Lease, last_seq: int = 0) -> None:
    """Save the step and give the lease back in one transaction (one commit, one WAL flush on PostgreSQL); when
    the save fails, the lease is still given back."""
    try:
        with transaction.atomic():
            _save_step(run, script, state, error=error, now=now, last_seq=last_seq)
            locks.release(lease)
    except BaseException:
        locks.release(lease)
        raise


class _StepLoop:
    """One event loop per process, on a thread of its own, for the steps synchronous callers run (a Celery worker
    runs one step per task). `async_to_sync` alone starts a new loop, in a new thread, for every call, and the
    Redis channel layer keeps its connections per loop: every step then opened (and left behind) a Redis
    connection for its live events. Here the step's coroutine runs on the one loop while its thread-sensitive
    database calls still run on the calling thread, as with `async_to_sync` (asgiref hands a call to the loop
    named in SyncToAsync.threadlocal, the way a sync view inside an ASGI request reaches the server's loop)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed() or self._pid != os.getpid():  # a forked child: its own
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="compactweb-steps", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def run(self, coroutine_function, /, **kwargs):
        local = SyncToAsync.threadlocal
        previous = getattr(local, "main_event_loop", None), getattr(local, "main_event_loop_pid", None)
        if previous[0] is not None and previous[1] == os.getpid() and previous[0].is_running():
            return async_to_sync(coroutine_function)(**kwargs)  # called for an event loop already: run there
        local.main_event_loop, local.main_event_loop_pid = self.loop(), os.getpid()
        try:
            return async_to_sync(coroutine_function)(**kwargs)
        finally:
            local.main_event_loop, local.main_event_loop_pid = previous


_step_loop = _StepLoop()


def do_run_step(*, session_id: int, claimed_at: float | None = None) -> StepResult:
    """`arun_step` for synchronous callers (the Celery task), on this process's step loop (`_StepLoop`)."""
    return _step_loop.run(arun_step, session_id=session_id, claimed_at=claimed_at)


# --- reads --------------------------------------------------------------------------------------------------------

def list_runs(*, status: str | None = None):
    runs = SimulatorRun.objects.select_related("session__provider").order_by("-created_at", "-pk")
    if status:
        runs = runs.filter(status=status)
    return runs


def run_summary(run: SimulatorRun) -> dict[str, Any]:
    session = run.session
    return {
        "id": run.pk,
        "session": session.pk,
        "title": session.title,
        "scenario": run.scenario,
        "seed": run.seed,
        "loop": run.loop,
        "turns_per_minute": run.turns_per_minute,
        "status": run.status,
        "steps_done": run.steps_done,
        "position": int(run.state.get("position", 0)),
        "next_step_at": run.next_step_at.isoformat() if run.next_step_at else None,
        "last_error": run.last_error,
        "model": session.provider.model,
        "context_window": session.provider.context_window,
        "window_number": session.window_number,
        "compaction_count": session.compaction_count,
        "tokens_in_window": session.tokens_in_window,
    }


def scenario_summary(name: str) -> dict[str, Any]:
    scenario = load_scenario(name)
    return {
        "name": scenario.name,
        "title": scenario.title,
        "description": scenario.description.strip(),
        "turns": len(scenario.turns),
        "tools": list(scenario.tools),
        "model": scenario.model,
        "context_window": scenario.context_window,
        "token_budget": scenario.token_budget,
        "model_switches": scenario.model_switches,
        "fault_plans": scenario.fault_plans,
    }
