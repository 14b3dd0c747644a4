"""Finish the gateway exchanges whose process ended before their record was written (gateway_app.journal): recorded
whole from the journal when their answer had ended, else as cut.

The scheduler's housekeeping and each gateway process's first exchange run the same sweep; this is for a
deployment that runs neither often (a cron job, or by hand after a crash)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from gateway_app.journal import do_sweep_cut


class Command(BaseCommand):
    help = ("Finish the gateway exchanges begun by a process that has since ended: recorded whole when their answer "
            "had ended, else as cut.")

    def handle(self, *args, **options) -> None:
        self.stdout.write(f"{do_sweep_cut()} exchange(s) of ended processes recorded (whole, or as cut)")
