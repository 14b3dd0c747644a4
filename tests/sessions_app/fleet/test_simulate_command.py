"""`manage.py simulate`: list scenarios, start a fleet, drive it in the foreground, pause / resume / stop."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import SimulatorRun
from sessions_app.simulator import list_scenarios

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command("simulate", *args, stdout=out)
    return out.getvalue()


def test_list_prints_every_scenario():
    output = run("--list")
    assert [line.split()[0] for line in output.splitlines()] == list_scenarios()


def test_start_a_fleet_and_drive_it_in_the_foreground(provider, policy):
    output = run("--scenario", "many-short-turns", "--count", "2", "--provider", provider.name, "--policy",
                 str(policy.pk), "--seed", "5", "--run-until-idle", "--max-steps", "3")

    runs = list(SimulatorRun.objects.order_by("pk"))
    assert [r.seed for r in runs] == [5, 6]
    assert sum(r.steps_done for r in runs) == 3
    assert "ran 3 step(s), 0 failed turn(s); 2 run(s) still running" in output


def test_pause_resume_and_stop_every_run(provider, policy):
    run("--scenario", "fix-failing-test", "--count", "2", "--provider", provider.name, "--policy", policy.name)

    assert "pause: 2 run(s)" in run("--pause")
    assert "resume: 1 run(s)" in run("--resume", "--run", str(SimulatorRun.objects.first().pk))
    assert "stop: 2 run(s)" in run("--stop")


@pytest.mark.parametrize(
    "args, message",
    [
        (("--scenario", "nope"), "unknown scenario"),
        (("--scenario", "fix-failing-test", "--provider", "missing"), "no provider 'missing'"),
        (("--scenario", "fix-failing-test", "--count", "0"), "count"),
        ((), "nothing to do"),
        (("--resume", "--run", "4242"), "does not exist"),
    ],
)
def test_bad_requests_fail_with_a_clear_message_and_start_nothing(provider, policy, args, message):
    defaults = ("--provider", provider.name, "--policy", policy.name) if "--provider" not in args else (
        "--policy", policy.name)
    with pytest.raises(CommandError, match=message):
        run(*args, *(defaults if args and args[0] == "--scenario" else ()))
    assert not SimulatorRun.objects.exists()


def test_setup_demo_seeds_the_demo_fleet_once():
    from sessions_app.fleet.runtime import DEMO_FLEET

    first = StringIO()
    call_command("setup_demo", stdout=first)
    call_command("setup_demo", stdout=StringIO())

    assert sorted(SimulatorRun.objects.values_list("scenario", flat=True)) == sorted(DEMO_FLEET)
    assert f"demo fleet: {len(DEMO_FLEET)} simulated sessions" in first.getvalue()
    assert set(SimulatorRun.objects.values_list("status", flat=True)) == {"running"}
