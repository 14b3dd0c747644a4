"""Recount the analytics roll-up from the compaction records (issue 34): the backfill of a database whose records
were written before the roll-up existed or past the records writer (a restore, a bulk load), and the repair of one
out of step. Migration 0022 runs the same recount once; afterwards compaction_app.records keeps it as it writes.

    manage.py rebuild_analytics_rollup

On PostgreSQL the attempts and compactions are locked against writes while it counts (reads go on): a compaction
finishing meanwhile waits for it.
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from compaction_app.rollup import rebuild


class Command(BaseCommand):
    help = (
        "Recount the analytics roll-up (per day, dimension, policy and provider) from the compaction records "
        "and the shares of the sessions retention archived."
    )

    def handle(self, *args, **options):
        started = time.perf_counter()
        counted = rebuild()
        self.stdout.write(
            f"counted {counted['attempts']} attempts and {counted['compactions']} compactions "
            f"and {counted['archived']} archived sessions' shares "
            f"in {time.perf_counter() - started:.1f} s"
        )
