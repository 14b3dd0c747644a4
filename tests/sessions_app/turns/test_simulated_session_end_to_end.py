"""A scenario run against the embedded model until automatic compaction has happened both pre-turn and mid-turn;
then the rollout must tell the whole story and the live history must equal a rebuild from it (issue 5)."""

from __future__ import annotations

import pytest

from compaction_app.models import Compaction
from sessions_app.fleet import runtime as fleet
from tests.sessions_app.turns.story import check_story

# Deterministic: the simulated model and tools depend only on the scenario, the seed and the window. With these,
# the session compacts mid-turn and pre-turn within a few turns (about 3 s on one core).
SCENARIO, SEED, WINDOW = "large-refactor", 1, 10_000
MAX_STEPS = 30


def phases(session_id: int) -> set[str]:
    return set(Compaction.objects.filter(session_id=session_id).values_list("phase", flat=True))


@pytest.mark.django_db
def test_a_simulated_session_compacts_pre_turn_and_mid_turn_and_its_rollout_tells_the_whole_story(
    provider, policy
):
    run = fleet.do_start_fleet(scenario=SCENARIO, count=1, provider=provider, policy=policy, seed=SEED,
                               loop=True, context_window=WINDOW)[0]
    for _ in range(MAX_STEPS):
        step = fleet.do_run_step(session_id=run.session_id)
        assert step.status == "ran", step
        if {"pre_turn", "mid_turn"} <= phases(run.session_id):
            break
    assert {"pre_turn", "mid_turn"} <= phases(run.session_id), f"no pre- and mid-turn compaction in {MAX_STEPS} steps"

    seen = check_story(run.session)
    assert seen["pre_turn"] >= 1 and seen["mid_turn"] >= 1 and seen["tool_calls"] >= 1
    run.refresh_from_db()
    assert run.steps_done == seen["turns"] and run.status == "running" and run.last_error == ""
