"""Heavy API work as jobs (issues 15, 28): with workers (a broker) a compaction, a replay or an import answers 202
with a job to follow at GET /api/v1/jobs/<id>, waiting or not (a request never waits for another process); without
workers the request runs the job itself (the default) or, with wait=false, hands it to the in-process pool. A job's
outcome is what the synchronous API answers, errors included, and a job runs at most once.

"With a broker" here means `background.uses_broker()` answers yes while Celery stays eager (the test settings have
no broker), so the task runs inside `apply_async`; tests/scale_out/test_api_jobs_on_a_worker.py runs it on a
real worker."""

from __future__ import annotations

import time

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import Compaction
from sessions_app.jobs import services as jobs
from sessions_app.models import Job, Session
from sessions_app.rollout.lease import acquire, release

ITEMS = [user_message("add pagination to the list endpoint"), user_message("and document it")]
ROLLOUT = (
    '{"timestamp":"2025-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":'
    '"0194b9a4-0000-7000-8000-000000000015","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/repo",'
    '"originator":"codex_cli_rs","cli_version":"0.1.0","instructions":null}}\n'
    '{"timestamp":"2025-01-01T00:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user",'
    '"content":[{"type":"input_text","text":"hello"}]}}\n'
)


@pytest.fixture
def operator_user(make_user):
    """The root fixture's operator, with the role groups (re)created first: a transactional test's flush empties
    the table the migration filled."""
    from django.contrib.auth.models import Group

    from compactweb.roles import ROLES

    for name in ROLES:
        Group.objects.get_or_create(name=name)
    return make_user("operator")


@pytest.fixture
def api_session(make_session):
    return make_session(items=ITEMS)


def compact(api, session, query="", **body):
    return api.post(f"/api/v1/sessions/{session.pk}/compact{query}", {"strategy": "local", **body}, format="json")


@pytest.mark.django_db
def test_with_workers_a_compaction_answers_202_with_a_job_to_poll(operator_api, api_session, with_workers,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = compact(operator_api, api_session)

    assert response.status_code == 202, response.content
    job = response.json()["job"]
    assert (job["kind"], job["session"], job["status"]) == ("compaction", api_session.pk, "queued")
    assert response["Location"] == job["url"] == f"/api/v1/jobs/{job['id']}"
    polled = operator_api.get(job["url"]).json()
    compaction = Compaction.objects.get(session=api_session)
    assert (polled["status"], polled["http_status"], polled["result"]) == (
        "succeeded", 201, {"compaction": compaction.pk})
    assert polled["started_at"] and polled["finished_at"]


@pytest.mark.django_db
def test_with_workers_a_caller_that_asks_to_wait_gets_the_job_to_follow_not_a_wait(
    operator_api, api_session, with_workers, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as handed_over:
        response = compact(operator_api, api_session, query="?wait=true")

    assert response.status_code == 202, response.content
    assert response.json()["job"]["status"] == "queued" and not Compaction.objects.exists()
    for callback in handed_over:  # the worker runs it after the request answered
        callback()
    assert Job.objects.get().status == "succeeded"
    assert Job.objects.get().result == {"compaction": Compaction.objects.get(session=api_session).pk}


@pytest.mark.django_db
def test_a_job_that_finds_the_session_busy_fails_with_the_apis_409(operator_api, api_session, with_workers,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as handed_over:
        queued = compact(operator_api, api_session)
    lease = acquire(session_id=api_session.pk, purpose="compaction")  # taken before a worker runs the job
    try:
        for callback in handed_over:
            callback()
    finally:
        release(lease)

    polled = operator_api.get(queued.json()["job"]["url"]).json()
    assert (polled["status"], polled["http_status"]) == ("failed", 409)
    assert polled["result"]["error"] == {
        "code": "busy", "message": f"session {api_session.pk} is busy: a compaction is running; try again when it ends"}
    assert not Compaction.objects.exists()


@pytest.mark.django_db
def test_a_job_runs_at_most_once(api_session, operator_user):
    job = Job.objects.create(kind="compaction", session=api_session, actor=operator_user,
                             params={"strategy": "local"})

    assert jobs.run_job(job_id=job.pk).status == "succeeded"
    assert jobs.run_job(job_id=job.pk) is None  # a redelivered task finds it taken

    assert Compaction.objects.filter(session=api_session).count() == 1


@pytest.mark.django_db
def test_without_workers_the_request_runs_the_compaction_job_by_default(operator_api, api_session):
    response = compact(operator_api, api_session)

    assert response.status_code == 201
    job = Job.objects.get()  # the one job model: the request was its runner
    assert (job.kind, job.status, job.http_status) == ("compaction", "succeeded", 201)
    assert response.json()["id"] == job.result["compaction"] == Compaction.objects.get().pk


@pytest.mark.django_db(transaction=True)
def test_without_workers_wait_false_runs_the_job_on_the_in_process_pool(operator_api, api_session):
    response = compact(operator_api, api_session, query="?wait=false")

    assert response.status_code == 202
    url = response.json()["job"]["url"]
    deadline = time.monotonic() + 30
    while (polled := operator_api.get(url).json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, polled
        time.sleep(0.05)
    assert (polled["status"], polled["result"]) == ("succeeded", {"compaction": Compaction.objects.get().pk})


@pytest.mark.django_db
@pytest.mark.parametrize("wait", ["maybe", "2"])
def test_a_bad_wait_is_refused_with_400_and_queues_nothing(operator_api, api_session, with_workers, wait):
    response = compact(operator_api, api_session, query=f"?wait={wait}")

    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid"
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_with_workers_an_unknown_session_is_404_and_queues_nothing(operator_api, with_workers):
    response = operator_api.post("/api/v1/sessions/987654/compact", {}, format="json")

    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_with_workers_a_replay_is_a_job_whose_result_is_the_replay(operator_api, api_session, policy, with_workers,
                                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.post(f"/api/v1/sessions/{api_session.pk}/replay", {"policy": policy.pk},
                                     format="json")

    assert response.status_code == 202, response.content
    polled = operator_api.get(response.json()["job"]["url"]).json()
    assert (polled["status"], polled["http_status"]) == ("succeeded", 201), polled
    assert polled["result"]["original"] == api_session.pk
    assert Session.objects.filter(pk=polled["result"]["replay"]).exists()


@pytest.mark.django_db
def test_with_workers_an_import_is_a_job_that_names_the_new_session(operator_api, with_workers, provider, policy,
                                                                    django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.generic("POST", "/api/v1/sessions/import?wait=true", ROLLOUT.encode(),
                                        content_type="application/x-ndjson")

    assert response.status_code == 202, response.content
    job = Job.objects.get()
    assert (job.kind, job.status, job.http_status) == ("import", "succeeded", 201)
    assert job.session_id == job.result["session"] and Session.objects.filter(pk=job.session_id).exists()


@pytest.mark.django_db
def test_an_import_job_with_a_bad_rollout_fails_with_the_lines_named(operator_api, with_workers, provider, policy,
                                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_api.generic("POST", "/api/v1/sessions/import", b"{not json\n",
                                        content_type="application/x-ndjson")

    polled = operator_api.get(response.json()["job"]["url"]).json()
    assert (polled["status"], polled["http_status"]) == ("failed", 400)
    assert polled["result"]["error"]["code"] == "invalid_rollout" and polled["result"]["error"]["lines"]
    assert Session.objects.count() == 0


@pytest.mark.django_db
def test_polling_a_job_needs_the_operator_role(api_client_for, make_user, api_session, operator_user):
    job = Job.objects.create(kind="compaction", session=api_session, actor=operator_user)

    assert api_client_for(make_user(None)).get(f"/api/v1/jobs/{job.pk}").status_code == 403
    assert api_client_for(operator_user).get("/api/v1/jobs/987654").status_code == 404
