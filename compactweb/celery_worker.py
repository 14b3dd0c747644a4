"""`celery -A compactweb worker ARGS` without Celery's umbrella command line: `python -m compactweb.celery_worker ARGS`
(issue 42, the cold start on a busy host).

`celery` imports every one of its subcommands before it parses a word: `amqp`'s shell pulls in click-repl and
prompt_toolkit, `multi`, `events`, `graph`, `shell`, `upgrade` their own, and it reads every installed
distribution's entry points for plugins. That is about 0.2 s of CPU of a worker's 1.7 s from its spawn to ready
(`import celery.bin.celery` 0.40 s against `celery.bin.worker` 0.21 s, idle machine), which a saturated host
stretches to seconds before a restarted set serves (docs/benchmarks.md, "The new set's own start after a
supervisor kill, round six"). This runs Celery's own `worker` command, so the options, their defaults, their
environment variables (`CELERY_WORKER_<OPTION>`, as under `celery`) and what the worker does are Celery's; only
the umbrella is left out, with what it would have done for `-A compactweb worker`: the app (compactweb.celery)
and the command's context. Its global options (`-b`, `--skip-checks`, ...) are not taken: give them by their
environment variables (`CELERY_BROKER_URL`, `CELERY_SKIP_CHECKS`), as scripts/scale-out does.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from compactweb.startup_gc import pause_collector

    pause_collector()  # until Django's apps are ready: see compactweb/startup_gc.py
    from celery import maybe_patch_concurrency

    maybe_patch_concurrency(sys.argv if argv is None else ["celery", *argv])  # eventlet or gevent, as `celery` does
    from celery.bin.base import CLIContext
    from celery.bin.worker import worker

    from compactweb.celery import app

    worker.params.extend(app.user_options.get("worker", []))
    worker.main(args=argv, prog_name="celery worker", auto_envvar_prefix="CELERY_WORKER",
                obj=CLIContext(app=app, no_color=False, workdir=None, quiet=False))


if __name__ == "__main__":
    main()
