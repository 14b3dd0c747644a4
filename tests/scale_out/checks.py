"""What every fault test of the scale-out set checks at its end (issue 42), one checker for all of them
(`assert_fault_run_clean`): 0 lines lost, 0 duplicated, 0 turns without an end, 0 deadlocks.

- **Lost**: each rollout's seqs are contiguous, its scenario steps are 0..n with none skipped, and the live
  projection equals a rebuild from the rollout (a line the projection has and the rollout lacks, or the reverse).
- **Duplicated**: no scenario step ran twice (one `turn_context` and one `turn_started` per turn), no turn has two
  `turn_started`, two `turn_complete` or two `error` lines, and no response item id is in a turn twice.
- **Unended**: every `turn_started` has its `turn_complete`; a turn a fault cut ended `interrupted` after an
  `error` line saying why.
- **Deadlocks**: none in PostgreSQL's own count for the database (`pg_stat_database.deadlocks`, read before and
  after the run: a deadlock the retries absorbed counts too), and no process log says "deadlock detected" or logs
  a retried deadlock ("conflict (40P01)").

And every run stopped (none failed). tests/scale_out/test_checks.py plants each fault and watches it fail.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from django.db import connection

from sessions_app.models import RolloutLine, Session, SimulatorRun
from sessions_app.rollout.services import verify_projection

DEADLOCK_LOG_TEXTS = ("deadlock detected", "conflict (40P01)")


def database_deadlocks() -> int | None:
    """PostgreSQL's count of the deadlocks it detected in this database since its statistics were reset (None on
    SQLite, which has no row locks). Fresh: the snapshot a transaction may keep is dropped first."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def assert_each_turn_once(session_ids) -> None:
    """Contiguous rollouts, each scenario step run once (one turn_started per turn), live projections equal to a
    rebuild, and every simulator run of these sessions stopped (none failed; a session with no run has none)."""
    for session_id in session_ids:
        seqs = list(RolloutLine.objects.filter(session_id=session_id).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1)), f"session {session_id}: seqs not contiguous (a line lost)"
        contexts = RolloutLine.objects.filter(session_id=session_id, kind="turn_context", payload__has_key="step")
        steps = [line.payload["step"] for line in contexts.order_by("seq")]
        assert steps == list(range(len(steps))), f"session {session_id}: turns {steps}"
        started = [line.payload["turn_id"] for line in RolloutLine.objects.filter(
            session_id=session_id, kind="event_msg", payload__type="turn_started")]
        assert len(started) == len(set(started)) == len(steps), f"session {session_id}: a turn started twice"
        problems = verify_projection(session=Session.objects.get(pk=session_id))
        assert problems == [], f"session {session_id}: the live projection differs from a rebuild: {problems[:3]}"
    statuses = set(SimulatorRun.objects.filter(session_id__in=session_ids).values_list("status", flat=True))
    assert statuses <= {SimulatorRun.Status.STOPPED}, f"runs not all stopped: {statuses}"  # (none: no fleet)


def assert_no_line_twice(session_ids) -> None:
    """No turn's start, end or error line twice, and no response item (by its id) twice within one turn; the
    message names each duplicate's seqs and turn. Across turns an id may come again: the simulated model's ids
    are hashes of the history's length and the user's text (compaction_app/providers/simulated/replies.py), which
    a looping scenario after a compaction repeats; a write that ran twice repeats them within its turn."""
    for session_id in session_ids:
        events: dict[tuple, list[int]] = {}
        item_ids: dict[str, list[tuple[int, str | None]]] = {}
        turn = None
        lines = RolloutLine.objects.filter(session_id=session_id, kind__in=["event_msg", "response_item"])
        for seq, kind, payload in lines.order_by("seq").values_list("seq", "kind", "payload"):
            if not isinstance(payload, dict):
                continue
            if kind == "event_msg" and payload.get("type") in ("turn_started", "turn_complete", "error"):
                if payload["type"] == "turn_started":
                    turn = payload.get("turn_id")
                events.setdefault((payload["type"], payload.get("turn_id")), []).append(seq)
            elif kind == "response_item" and payload.get("id"):
                item_ids.setdefault((turn, payload["id"]), []).append((seq, turn))
        twice = [(key, seqs) for key, seqs in events.items() if len(seqs) > 1]
        twice += [(key[1], at) for key, at in item_ids.items() if len(at) > 1]
        assert twice == [], f"session {session_id}: {len(twice)} duplicated lines (key, [(seq, turn)]): {twice[:6]}"


def assert_every_turn_ended(session_ids) -> None:
    """Every `turn_started` has its `turn_complete` (issue 42): a turn a fault cut ended `interrupted`, after an
    `error` line saying why."""
    for session_id in session_ids:
        lines = RolloutLine.objects.filter(session_id=session_id, kind="event_msg",
                                           payload__type__in=["turn_started", "turn_complete", "error"])
        started, ended, errors = [], {}, {}
        for payload in lines.order_by("seq").values_list("payload", flat=True):
            kind, turn = payload["type"], payload.get("turn_id")
            if kind == "turn_started":
                started.append(turn)
            elif kind == "turn_complete":
                ended[turn] = payload.get("status")
            else:
                errors[turn] = payload.get("message", "")
        assert [t for t in started if t not in ended] == [], f"session {session_id}: a turn never ended"
        for turn, status in ended.items():
            if status == "interrupted":
                assert errors.get(turn, "").startswith("The turn was interrupted"), f"session {session_id}: {turn}"


def deadlock_lines(logs: Iterable[Path]) -> list[str]:
    """The lines of these process logs that tell of a deadlock (files that do not exist are skipped)."""
    found = []
    for log in logs:
        if not log.is_file():
            continue
        for line in log.read_text(errors="replace").splitlines():
            if any(text in line for text in DEADLOCK_LOG_TEXTS):
                found.append(f"{log.name}: {line.strip()[:300]}")
    return found


def logs_under(*folders: Path) -> list[Path]:
    """Every process log (`*.log`) of a run: its folders and theirs."""
    return sorted(log for folder in folders for log in folder.rglob("*.log"))


def stepped_since(session_id: int, since: datetime) -> bool:
    """Whether the session began a scenario step (its `turn_context`) after `since`."""
    return RolloutLine.objects.filter(session_id=session_id, kind="turn_context", payload__has_key="step",
                                      timestamp__gt=since).exists()


def seconds_until_each_steps(session_ids, *, since: datetime, since_clock: float, timeout: float,
                             what: str = "sessions") -> float:
    """Wait until every session stepped after `since` (a fault's end, say), for at most `timeout` seconds after
    `since_clock` (its time.monotonic()); the seconds from `since_clock` until the last of them had. Fails naming
    the sessions that did not."""
    pending = set(session_ids)
    while pending:
        pending = {s for s in pending if not stepped_since(s, since)}
        if not pending or time.monotonic() - since_clock >= timeout:
            break
        time.sleep(0.2)
    assert not pending, f"{what} {sorted(pending)} did not step again within {timeout:g} s"
    return time.monotonic() - since_clock


def dump_rollouts(session_ids, folder: Path) -> None:
    """Each session's rollout lines as JSON Lines in `folder` (rollout-<id>.jsonl): what a failed check leaves for
    triage, since the test database is emptied after the test."""
    folder.mkdir(parents=True, exist_ok=True)
    for session_id in session_ids:
        rows = RolloutLine.objects.filter(session_id=session_id).order_by("seq")
        with open(folder / f"rollout-{session_id}.jsonl", "w") as out:
            for seq, timestamp, kind, payload in rows.values_list("seq", "timestamp", "kind", "payload"):
                out.write(json.dumps({"seq": seq, "timestamp": timestamp.isoformat(), "kind": kind,
                                      "payload": payload}) + "\n")


def assert_fault_run_clean(session_ids, *, logs: Iterable[Path], deadlocks_before: int | None,
                           dump_to: Path | None = None) -> dict[str, int]:
    """The fault suite's one check (module docstring): 0 lost, 0 duplicated, 0 unended, 0 deadlocks. Call it after
    the set's processes stopped (a backend reports its deadlock count by the time it exits). Returns what was
    checked, for the run's report. `dump_to`: a folder that gets every session's rollout when a check fails."""
    session_ids = list(session_ids)
    assert session_ids, "a fault run with no sessions checks nothing"
    try:
        assert_each_turn_once(session_ids)
        assert_no_line_twice(session_ids)
        assert_every_turn_ended(session_ids)
    except AssertionError:
        if dump_to is not None:
            dump_rollouts(session_ids, dump_to)
        raise
    found = deadlock_lines(logs)
    assert found == [], f"{len(found)} deadlock line(s) in the process logs: {found[:5]}"
    after = database_deadlocks()
    if deadlocks_before is not None and after is not None:
        assert after - deadlocks_before == 0, f"PostgreSQL detected {after - deadlocks_before} deadlock(s)"
    lines = RolloutLine.objects.filter(session_id__in=session_ids)
    return {
        "sessions": len(session_ids),
        "turns": lines.filter(kind="event_msg", payload__type="turn_started").count(),
        "interrupted": lines.filter(kind="event_msg", payload__type="turn_complete",
                                    payload__status="interrupted").count(),
        "compactions": lines.filter(kind="compacted").count(),
        "lines": lines.count(),
        "deadlocks": 0,
    }
