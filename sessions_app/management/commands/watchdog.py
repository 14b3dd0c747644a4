"""Restart scale-out processes that are running but no longer answer (compactweb.watchdog), through supervisord.

    manage.py watchdog --supervisor-socket var/scale-out/supervisor.sock --host 127.0.0.1 \
        --web-ports 8001,8002 --workers 2 [--scheduler-heartbeat var/scale-out/scheduler.heartbeat] \
        [--interval 5] [--grace 20] [--heartbeat-max-age 30]

scripts/scale-out runs it as one of its supervised programs; programs are named as the launcher names them
(`web-<port>`, `worker-<n>`, `scheduler`).
"""

from __future__ import annotations

import functools
import time

from django.core.management.base import BaseCommand, CommandError

from compactweb import watchdog


class Command(BaseCommand):
    help = "Probe the web processes and workers supervisord runs and restart the ones that stop answering."

    def add_arguments(self, parser):
        parser.add_argument("--supervisor-socket", required=True, help="supervisord's unix socket.")
        parser.add_argument("--host", default="127.0.0.1", help="Where the web processes listen.")
        parser.add_argument("--web-ports", default="", help="Comma-separated ports of the web processes.")
        parser.add_argument("--workers", type=int, default=0, help="How many workers (worker-1 .. worker-N).")
        parser.add_argument("--interval", type=float, default=watchdog.INTERVAL_SECONDS,
                            help="Seconds between two rounds of checks.")
        parser.add_argument("--grace", type=float, default=watchdog.GRACE_SECONDS,
                            help="Seconds after a program's start during which it is not judged.")
        parser.add_argument("--scheduler-heartbeat", default="",
                            help="The scheduler's heartbeat file (its --heartbeat-file): restart the program "
                                 "'scheduler' when the file is older than --heartbeat-max-age.")
        parser.add_argument("--heartbeat-max-age", type=float, default=watchdog.HEARTBEAT_MAX_AGE,
                            help="Seconds without a heartbeat after which the scheduler counts as hung.")

    def handle(self, *args, **opts):
        try:
            ports = [int(p) for p in opts["web_ports"].split(",") if p.strip()]
        except ValueError:
            raise CommandError("--web-ports takes comma-separated port numbers") from None
        if opts["interval"] <= 0 or opts["workers"] < 0 or opts["grace"] < 0 or opts["heartbeat_max_age"] <= 0:
            raise CommandError("--interval and --heartbeat-max-age must be positive, --workers and --grace not "
                               "negative")
        probes = {f"web-{port}": functools.partial(watchdog.web_alive, opts["host"], port) for port in ports}
        for n in range(1, opts["workers"] + 1):
            name = f"worker-{n}"
            probes[name] = functools.partial(watchdog.worker_alive, watchdog.celery_node(name))
        if opts["scheduler_heartbeat"]:
            probes["scheduler"] = functools.partial(watchdog.scheduler_alive, opts["scheduler_heartbeat"],
                                                    max_age=opts["heartbeat_max_age"])
        dog = watchdog.Watchdog(supervisor=watchdog.supervisor_proxy(opts["supervisor_socket"]), probes=probes,
                                grace_seconds=opts["grace"])
        self.stdout.write(f"watchdog: watching {', '.join(probes) or 'nothing'} every {opts['interval']:g}s")
        self.stdout.flush()
        while True:
            try:
                dog.check_once()
            except Exception as exc:  # supervisord restarting, a probe failing oddly: try again next round
                self.stderr.write(f"watchdog: a round failed ({type(exc).__name__}: {exc})")
            time.sleep(opts["interval"])
