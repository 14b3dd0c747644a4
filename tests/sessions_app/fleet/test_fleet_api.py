"""Fleet control over the JSON API: start, list, pause / resume / stop, scenarios; operator role required."""

from __future__ import annotations

import pytest

from sessions_app.models import Session, SimulatorRun
from sessions_app.simulator import list_scenarios

pytestmark = pytest.mark.django_db


def body(provider_row, policy_row, **extra):
    return {"scenario": "fix-failing-test", "count": 2, "provider": provider_row.pk, "policy": policy_row.pk, **extra}


def test_an_operator_starts_a_fleet_and_lists_it(operator_api, provider, policy):
    response = operator_api.post("/api/v1/fleet", body(provider, policy, turns_per_minute=6, loop=True, seed=9),
                                 format="json")

    assert response.status_code == 201, response.json()
    runs = response.json()["runs"]
    assert [(r["scenario"], r["seed"], r["loop"], r["turns_per_minute"], r["status"]) for r in runs] == [
        ("fix-failing-test", 9, True, 6.0, "running"), ("fix-failing-test", 10, True, 6.0, "running")]
    assert runs[0]["context_window"] == 64_000 and runs[0]["steps_done"] == 0
    listed = operator_api.get("/api/v1/fleet").json()
    assert sorted(r["id"] for r in listed) == sorted(r["id"] for r in runs)
    assert operator_api.get("/api/v1/fleet?status=paused").json() == []
    assert operator_api.get("/api/v1/fleet?status=bogus").status_code == 400


@pytest.mark.parametrize(
    "extra, field",
    [({"scenario": "nope"}, "scenario"), ({"count": 0}, "count"), ({"turns_per_minute": -1}, "turns_per_minute"),
     ({"provider": 99999}, "provider"), ({"context_window": 5}, "context_window")],
)
def test_a_bad_fleet_request_is_400_and_starts_nothing(operator_api, provider, policy, extra, field):
    response = operator_api.post("/api/v1/fleet", body(provider, policy, **extra), format="json")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid" and field in response.json()["error"]["message"]
    assert not Session.objects.exists()


def test_pause_resume_stop_one_run_and_refuse_the_wrong_state(operator_api, provider, policy):
    run_id = operator_api.post("/api/v1/fleet", body(provider, policy, count=1), format="json").json()["runs"][0]["id"]

    assert operator_api.post(f"/api/v1/fleet/{run_id}/pause").json()["status"] == "paused"
    refused = operator_api.post(f"/api/v1/fleet/{run_id}/pause")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_state"
    assert operator_api.post(f"/api/v1/fleet/{run_id}/resume").json()["status"] == "running"
    assert operator_api.post(f"/api/v1/fleet/{run_id}/stop").json()["status"] == "stopped"
    assert operator_api.post(f"/api/v1/fleet/{run_id}/explode").status_code == 404
    assert operator_api.post("/api/v1/fleet/424242/pause").status_code == 404


def test_actions_on_the_whole_fleet(operator_api, provider, policy):
    operator_api.post("/api/v1/fleet", body(provider, policy, count=3), format="json")

    assert operator_api.post("/api/v1/fleet/pause").json() == {"changed": 3}
    assert operator_api.post("/api/v1/fleet/stop").json() == {"changed": 3}
    assert set(SimulatorRun.objects.values_list("status", flat=True)) == {"stopped"}


def test_the_scenario_library_is_listed(operator_api):
    scenarios = operator_api.get("/api/v1/scenarios").json()

    assert [s["name"] for s in scenarios] == list_scenarios()
    downshift = next(s for s in scenarios if s["name"] == "model-downshift")
    assert downshift["model_switches"] and downshift["context_window"] == 128_000


def test_fleet_control_needs_the_operator_role(norole_api, anon_api, provider, policy):
    assert norole_api.get("/api/v1/fleet").status_code == 403
    assert norole_api.post("/api/v1/fleet", body(provider, policy), format="json").status_code == 403
    assert anon_api.get("/api/v1/scenarios").status_code == 401
    assert not Session.objects.exists()
