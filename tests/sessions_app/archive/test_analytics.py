"""All-time analytics keep what archived sessions did (docs/retention-policy.md, "Analytics"): archiving a session
leaves GET /api/v1/analytics as it was, a rebuild of the roll-up gives the same answer, and a restore moves the
compactions back to the re-imported rows without counting them twice. Periods read the rows in the database."""

from __future__ import annotations

import gzip
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction_app import records
from compaction_app.models import ArchivedShare, Compaction, CompactionAttempt
from sessions_app.archive import services
from sessions_app.models import Session, SessionArchive
from tests.compaction_app.test_rollup import STEP, run_steps  # the roll-up's property test's writes

pytestmark = pytest.mark.django_db

FILTERS = ({}, {"policy": "policy"}, {"provider": "provider"})


def _analytics(api, *, policy, provider) -> list[dict]:
    """The all-time answer, unfiltered and by the session's policy and provider."""
    answers = []
    for chosen in FILTERS:
        query = {
            "period": "",
            **{k: {"policy": policy, "provider": provider}[v].pk for k, v in chosen.items()},
        }
        response = api.get("/api/v1/analytics", query)
        assert response.status_code == 200, response.content
        answer = response.json()
        answer.pop("archived_sessions")
        answers.append(answer)
    return answers


def _rebuild() -> str:
    out = StringIO()
    call_command("rebuild_analytics_rollup", stdout=out)
    return out.getvalue()


def _failed_attempt(session, *, duration_ms: int) -> None:
    attempt = records.start_attempt(
        session=session,
        item_id="i",
        turn_id="t",
        trigger="manual",
        reason="user_requested",
        implementation="responses",
        phase="standalone_turn",
        strategy="local",
        tokens_before=100,
    )
    records.fail_attempt(attempt_id=attempt.pk, kind="k", message="m")
    CompactionAttempt.objects.filter(pk=attempt.pk).update(duration_ms=duration_ms)  # (a test's own duration)


@pytest.fixture
def two_sessions(ended_session, make_session, add_turn, compact):
    """The ended session with failed attempts of known durations besides its compaction (the percentiles pick
    among its and a kept session's durations), and a kept recent session."""
    for duration in (1003, 1001, 1050, 20, 5000):
        _failed_attempt(ended_session, duration_ms=duration)
    kept = make_session(title="kept")
    add_turn(kept, 1)
    compact(kept)
    _failed_attempt(kept, duration_ms=1002)
    _rebuild()  # the durations were written past the records writer
    return ended_session, kept


def test_archiving_a_session_leaves_the_all_time_analytics_as_they_were(
    two_sessions, operator_api, policy, provider
):
    ended, _ = two_sessions
    before = _analytics(operator_api, policy=policy, provider=provider)
    assert before[0]["attempts"] >= 7 and before[0]["latency_ms"]["count"] >= 7

    run = services.do_run_archiver(trigger="test")

    assert run.archived == 1 and not Session.objects.filter(pk=ended.pk).exists()
    assert not CompactionAttempt.objects.filter(session_id=ended.pk).exists()
    assert _analytics(operator_api, policy=policy, provider=provider) == before
    assert operator_api.get("/api/v1/analytics", {"period": ""}).json()["archived_sessions"] == 1


def test_a_rebuild_after_archiving_gives_the_same_answer(two_sessions, operator_api, policy, provider):
    before = _analytics(operator_api, policy=policy, provider=provider)
    services.do_run_archiver(trigger="test")

    assert "and 1 archived sessions' shares" in _rebuild()

    assert _analytics(operator_api, policy=policy, provider=provider) == before


def test_a_restore_counts_the_session_once(two_sessions, operator_api, policy, provider):
    ended, _ = two_sessions
    before = _analytics(operator_api, policy=policy, provider=provider)
    services.do_run_archiver(trigger="test")
    archive = SessionArchive.objects.get(session_id=ended.pk)

    result = services.do_restore_archive(archive_id=archive.pk)

    assert Compaction.objects.filter(session=result.session).exists()
    assert ArchivedShare.objects.get(archive=archive).restored_at is not None
    assert _analytics(operator_api, policy=policy, provider=provider) == before
    _rebuild()
    assert _analytics(operator_api, policy=policy, provider=provider) == before
    # The attempts are not in the file: they stay counted from the archive's share.
    assert operator_api.get("/api/v1/analytics", {"period": ""}).json()["archived_sessions"] == 1


def test_a_period_counts_the_sessions_in_the_database(two_sessions, operator_api):
    services.do_run_archiver(trigger="test")

    answer = operator_api.get("/api/v1/analytics", {"period": "30"}).json()

    assert answer["archived_sessions"] is None
    assert answer["attempts"] == CompactionAttempt.objects.count()


# Every write test_rollup's property test makes, but "import": its rows have no `compacted` line in the rollout
# (a test's shortcut), so no archive file can carry them back.
ARCHIVABLE_STEP = STEP.filter(lambda step: step[0] != "import")


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(ARCHIVABLE_STEP, min_size=3, max_size=10))
def test_archive_rebuild_restore_rebuild_leave_all_time_analytics_as_they_were_after_any_writes(
    make_session, operator_api, provider, policy, steps
):
    session, _, _ = run_steps(steps, make_session=make_session, operator_api=operator_api, policy=policy,
                              provider=provider)
    Session.objects.filter(pk=session.pk).update(
        state=Session.State.STOPPED, updated_at=timezone.now() - timedelta(days=40)
    )
    filters = {"policy": policy, "provider": provider}
    before = _analytics(operator_api, **filters)

    assert services.do_run_archiver(trigger="test").archived == 1
    assert _analytics(operator_api, **filters) == before
    _rebuild()
    assert _analytics(operator_api, **filters) == before
    services.do_restore_archive(archive_id=SessionArchive.objects.get(session_id=session.pk).pk)
    assert _analytics(operator_api, **filters) == before
    _rebuild()
    assert _analytics(operator_api, **filters) == before


def test_the_analytics_page_says_all_time_includes_the_archived_sessions(two_sessions, client, operator_user):
    client.force_login(operator_user)
    services.do_run_archiver(trigger="test")

    all_time = client.get("/analytics/", {"period": ""}).content.decode()
    last_week = client.get("/analytics/", {"period": "7"}).content.decode()

    assert "includes 1 archived session" in all_time and 'id="analytics-archived"' in all_time
    assert "archived session" not in last_week


def test_the_file_imported_by_hand_counts_once_after_a_refused_restore(
    two_sessions, operator_api, policy, provider, archive_dir
):
    """Someone imports the archive file through the Import page: its compactions count twice (the import adds them,
    the archive's share still holds them) until a restore, refused as already imported, moves the share."""
    from sessions_app.transfer.importer import do_import_rollout
    from sessions_app.transfer.refusals import AlreadyImported

    ended, _ = two_sessions
    before = _analytics(operator_api, policy=policy, provider=provider)
    services.do_run_archiver(trigger="test")
    archive = SessionArchive.objects.get(session_id=ended.pk)
    with gzip.open(archive_dir / archive.file_name, "rt", encoding="utf-8") as handle:
        do_import_rollout(
            lines=list(handle), source_name=archive.export_name, policy=policy, provider=provider
        )
    assert _analytics(operator_api, policy=policy, provider=provider) != before

    with pytest.raises(AlreadyImported):
        services.do_restore_archive(archive_id=archive.pk)

    assert _analytics(operator_api, policy=policy, provider=provider) == before
    with pytest.raises(AlreadyImported):  # once: the moved share is left alone
        services.do_restore_archive(archive_id=archive.pk)
    assert _analytics(operator_api, policy=policy, provider=provider) == before
