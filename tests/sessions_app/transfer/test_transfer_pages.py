"""The rollout upload page and the replay comparison page (operator role)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import CompactionPolicy
from sessions_app.models import Job, Session


@pytest.fixture
def operator_client(client, operator_user):
    client.force_login(operator_user)
    return client


def test_the_import_page_needs_a_login_and_renders_the_form(client, operator_client, provider, policy):
    page = operator_client.get("/import/")
    assert page.status_code == 200 and 'type="file"' in page.content.decode()


def test_uploading_a_rollout_imports_it_and_opens_the_session(operator_client, rollout_bytes, provider, policy):
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile("rollout.jsonl", rollout_bytes("compactions.jsonl")),
        "provider": provider.pk, "policy": policy.pk,
    })
    session = Session.objects.get(source="imported")
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"


def test_a_bad_upload_in_strict_mode_lists_its_bad_lines_and_imports_nothing(
    operator_client, rollout_bytes, provider, policy, row_counts
):
    before = row_counts()
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile("bad.jsonl", rollout_bytes("malformed_bad_json.jsonl")), "strict": "1",
    })
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was imported." in page and 'id="import-errors"' in page and "<td class=\"num\">3</td>" in page
    assert row_counts() == before


def _original(make_session, add_turn):
    original = make_session()
    for n in range(4):
        add_turn(original, n, size=80)
    return original


def test_the_replay_page_runs_the_replay_as_a_job_then_shows_the_comparison(
    operator_client, make_session, add_turn, with_workers, django_capture_on_commit_callbacks
):
    original = _original(make_session, add_turn)
    tight = CompactionPolicy.objects.create(name="tight", auto_compact_token_limit=600, strategy="remote_v1")

    with django_capture_on_commit_callbacks(execute=True):
        response = operator_client.post(f"/sessions/{original.pk}/replays/", {"policy": tight.pk})

    job = Job.objects.get(kind=Job.Kind.REPLAY)
    assert response.status_code == 302 and response["Location"] == f"/sessions/{original.pk}/replays/?job={job.pk}"
    assert (job.status, job.http_status, job.session_id) == ("succeeded", 201, original.pk)
    replay = Session.objects.get(source="replay")
    assert job.result["replay"] == replay.pk
    page = operator_client.get(response["Location"]).content.decode()
    assert f'id="comparison-{replay.pk}"' in page and "Tokens freed (history estimates)" in page and "every 2s" not in page
    assert f"Replay job #{job.pk} finished: its comparison is below." in page
    assert 'data-outcome="complete"' in page and "failed part way" not in page
    assert operator_client.get(f"/sessions/{replay.pk}/replays/").status_code == 200


def test_a_queued_replay_job_is_shown_and_its_partial_polls_until_it_ends(operator_client, make_session, add_turn,
                                                                         with_workers):
    original = _original(make_session, add_turn)
    operator_client.post(f"/sessions/{original.pk}/replays/", {"policy": CompactionPolicy.objects.first().pk})

    job = Job.objects.get(kind=Job.Kind.REPLAY)  # not sent: the request's commit callbacks did not run
    page = operator_client.get(f"/sessions/{original.pk}/replays/").content.decode()
    assert f'id="replay-job-{job.pk}"' in page and 'data-job-status="queued"' in page and "every 2s" in page
    assert not Session.objects.filter(source="replay").exists()  # nothing ran in the request
    partial = operator_client.get(f"/sessions/{original.pk}/replays/", headers={"HX-Request": "true"})
    body = partial.content.decode()
    assert body.lstrip().startswith('<div id="replays"') and 'id="replay-form"' not in body


def test_a_failed_replay_job_says_why_on_the_page(operator_client, make_session, add_turn, with_workers,
                                                  django_capture_on_commit_callbacks):
    original = _original(make_session, add_turn)
    gone = CompactionPolicy.objects.create(name="gone")
    with django_capture_on_commit_callbacks(execute=True):
        operator_client.post(f"/sessions/{original.pk}/replays/", {"policy": gone.pk})
        gone.delete()  # before the job runs

    job = Job.objects.get(kind=Job.Kind.REPLAY)
    page = operator_client.get(f"/sessions/{original.pk}/replays/").content.decode()
    assert job.status == "failed" and 'data-job-status="failed"' in page
    assert f"Replay job #{job.pk}: failed: " in page and "every 2s" not in page


def test_a_replay_that_fails_part_way_is_shown_failed_and_partial_beside_no_success_notice(
    operator_client, make_session, add_turn, with_workers, django_capture_on_commit_callbacks, monkeypatch
):
    from django.db import OperationalError

    from sessions_app.transfer import replay as replay_module

    original = _original(make_session, add_turn)
    feed, fed = replay_module._Replayer.feed, []

    def locked_after_a_few_lines(self, line):
        fed.append(line)
        if len(fed) > 3:
            raise OperationalError("database is locked")
        return feed(self, line)

    monkeypatch.setattr(replay_module._Replayer, "feed", locked_after_a_few_lines)
    with django_capture_on_commit_callbacks(execute=True):
        response = operator_client.post(f"/sessions/{original.pk}/replays/",
                                        {"policy": CompactionPolicy.objects.first().pk})

    job = Job.objects.get(kind=Job.Kind.REPLAY)
    replay = Session.objects.get(source="replay")
    page = operator_client.get(response["Location"]).content.decode()  # where the form's answer leads
    assert job.status == "failed" and replay.state == "failed"
    assert f"Replay job #{job.pk}: failed: " in page
    comparison = page[page.index(f'id="comparison-{replay.pk}"'):]
    assert 'data-outcome="failed"' in page and "This replay failed part way" in comparison
    assert "Replay started" not in page and "flash__item--success" not in page and "note--ok" not in page


def test_an_import_refusal_is_shown_inside_the_form_with_or_without_htmx(operator_client, rollout_bytes, row_counts):
    before = row_counts()
    upload = {"file": SimpleUploadedFile("bad.jsonl", rollout_bytes("malformed_bad_json.jsonl")), "strict": "1"}
    page = operator_client.post("/import/", upload).content.decode()
    form = page[page.index('id="import-form"'):page.index("</form>", page.index('id="import-form"'))]
    assert 'id="import-errors"' in form and "Nothing was imported." in form

    upload["file"] = SimpleUploadedFile("bad.jsonl", rollout_bytes("malformed_bad_json.jsonl"))
    response = operator_client.post("/import/", upload, HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    assert response.status_code == 400 and fragment.lstrip().startswith('<form id="import-form"')
    assert 'id="import-errors"' in fragment and "<html" not in fragment
    assert row_counts() == before


def test_an_import_with_htmx_goes_to_the_new_session(operator_client, rollout_bytes, provider, policy):
    response = operator_client.post("/import/", {
        "file": SimpleUploadedFile("rollout.jsonl", rollout_bytes("compactions.jsonl")),
        "provider": provider.pk, "policy": policy.pk,
    }, HTTP_HX_REQUEST="true")
    session = Session.objects.get(source="imported")
    assert response.status_code == 204 and response["HX-Redirect"] == f"/sessions/{session.pk}/"


def test_a_replay_without_a_policy_says_why_inside_the_replay_form(operator_client, make_session, add_turn):
    original = make_session()
    add_turn(original, 0)
    response = operator_client.post(f"/sessions/{original.pk}/replays/", {"policy": "9999"})
    page = response.content.decode()
    form = page[page.index('id="replay-form"'):page.index("</form>", page.index('id="replay-form"'))]
    assert response.status_code == 400 and "Not replayed: Choose the policy to replay under." in form
    assert not Session.objects.filter(source="replay").exists()


def test_the_import_page_says_malformed_lines_are_skipped_unless_strict(operator_client):
    page = operator_client.get("/import/").content.decode()
    assert "A malformed line is skipped, and the import lists it with its number" in page
    assert "if any line is malformed nothing is imported" not in page
