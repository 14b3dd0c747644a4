"""Start simulated sessions from a scenario, drive them, or run the simulator's scheduler in the foreground.

    manage.py simulate --list
    manage.py simulate --scenario many-short-turns --count 5 --provider embedded --policy default \\
        [--turns-per-minute 6] [--loop] [--seed 7] [--context-window 16000] [--run-until-idle [--max-steps N]]
    manage.py simulate --run-until-idle             # drive every running run until the non-looping ones finish
    manage.py simulate --scheduler                  # the scheduler loop (inline, or enqueueing Celery tasks)
    manage.py simulate --scheduler --heartbeat-file var/scale-out/scheduler.heartbeat   # ...watched by the watchdog
    manage.py simulate --pause|--resume|--stop [--run ID]
"""

from __future__ import annotations

import threading

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError

from compaction_app.models import CompactionPolicy, Provider
from compactweb import background
from sessions_app.fleet import runtime as fleet
from sessions_app.fleet.scheduler import DEFAULT_CONCURRENCY, Scheduler
from sessions_app.management.lookups import row_by_id_or_name
from sessions_app.simulator import list_scenarios


class Command(BaseCommand):
    help = "Start a fleet of simulated sessions from a scenario and optionally drive it; or run the scheduler."

    def add_arguments(self, parser):
        parser.add_argument("--list", action="store_true", help="List the scenario library and exit.")
        parser.add_argument("--scenario", help="Scenario name (see --list).")
        parser.add_argument("--count", type=int, default=1, help="How many sessions to start (default 1).")
        parser.add_argument("--provider", default="embedded", help="Provider name or id (default: embedded).")
        parser.add_argument("--policy", default="default", help="Compaction policy name or id (default: default).")
        parser.add_argument("--turns-per-minute", type=float, default=None,
                            help="Pacing per session (default: as fast as possible).")
        parser.add_argument("--loop", action="store_true", help="Repeat the script forever, with variations.")
        parser.add_argument("--seed", type=int, default=None, help="Base seed (session i gets seed + i).")
        parser.add_argument("--context-window", type=int, default=None,
                            help="Start the sessions with this window (default: scenario, else provider).")
        parser.add_argument("--run-until-idle", action="store_true",
                            help="Run steps in this process until no run is running (or --max-steps/--timeout).")
        parser.add_argument("--max-steps", type=int, default=None, help="Stop driving after this many steps.")
        parser.add_argument("--timeout", type=float, default=None, help="Stop driving after this many seconds.")
        parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                            help=f"Steps run at once, on different sessions (default {DEFAULT_CONCURRENCY}).")
        parser.add_argument("--scheduler", action="store_true",
                            help="Run the scheduler loop until interrupted: steps in-process, or Celery tasks "
                                 "when CELERY_BROKER_URL is set.")
        parser.add_argument("--heartbeat-file", default=None,
                            help="With --scheduler: touch this file every round of the loop (the watchdog's "
                                 "--scheduler-heartbeat restarts a scheduler that stops touching it).")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--pause", action="store_true", help="Pause --run ID, or every running run.")
        group.add_argument("--resume", action="store_true", help="Resume --run ID, or every paused run.")
        group.add_argument("--stop", action="store_true", help="Stop --run ID, or every run.")
        parser.add_argument("--run", type=int, default=None, help="The simulator run for --pause/--resume/--stop.")

    def handle(self, *args, **opts):
        if opts["list"]:
            for name in list_scenarios():
                summary = fleet.scenario_summary(name)
                self.stdout.write(f"{name:40} {summary['turns']:3} turns  {summary['title']}")
            return
        for action in ("pause", "resume", "stop"):
            if opts[action]:
                try:
                    changed = getattr(fleet, f"do_{action}_run")(run=opts["run"])
                except fleet.FleetError as exc:
                    raise CommandError(str(exc)) from None
                self.stdout.write(f"{action}: {changed} run(s)")
                return
        if opts["scenario"]:
            self._start(opts)
        elif not (opts["run_until_idle"] or opts["scheduler"]):
            raise CommandError("nothing to do: give --list, --scenario, --run-until-idle, --scheduler or an action")
        if opts["run_until_idle"]:
            scheduler = Scheduler(concurrency=opts["concurrency"], inline=True)
            steps = async_to_sync(scheduler.run_until_idle)(timeout=opts["timeout"], max_steps=opts["max_steps"])
            failed = sum(1 for r in scheduler.results if r.turn_status == "failed")
            self.stdout.write(f"ran {steps} step(s), {failed} failed turn(s); {fleet.active_runs()} run(s) still running")
        if opts["scheduler"]:
            mode = "Celery tasks" if background.uses_broker() else "in-process"
            self.stdout.write(f"simulator scheduler running ({mode}); Ctrl-C to stop")
            stop = threading.Event()
            try:
                scheduler = Scheduler(concurrency=opts["concurrency"], heartbeat_path=opts["heartbeat_file"])
                async_to_sync(scheduler.run)(stop)
            except KeyboardInterrupt:
                stop.set()

    def _start(self, opts) -> None:
        if opts["scenario"] not in list_scenarios():
            raise CommandError(f"unknown scenario {opts['scenario']!r}; known: {', '.join(list_scenarios())}")
        provider, policy = row_by_id_or_name(Provider, opts["provider"]), row_by_id_or_name(CompactionPolicy, opts["policy"])
        try:
            runs = fleet.do_start_fleet(
                scenario=opts["scenario"], count=opts["count"], provider=provider, policy=policy,
                turns_per_minute=opts["turns_per_minute"], loop=opts["loop"], seed=opts["seed"],
                context_window=opts["context_window"],
            )
        except fleet.FleetError as exc:
            raise CommandError(str(exc)) from None
        for run in runs:
            self.stdout.write(f"run {run.pk}: session {run.session_id} {run.session.title!r} (seed {run.seed})")
