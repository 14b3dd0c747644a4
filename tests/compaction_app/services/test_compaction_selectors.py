"""Reads for the inspector and the analytics page: the history right before a compaction (rebuilt from the rollout),
what left the window and what was kept, attempts with their analytics, and the aggregates."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction_app import rollup
from compaction_app.engine.items import user_message
from compaction_app.models import Compaction, CompactionAttempt
from sessions_app.compactions import analytics, presentation, selectors
from sessions_app.compactions.services import CompactionFailed, do_compact_session
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.models import LiveItem, Session
from sessions_app.web.api.compaction_serializers import CompactionDetailSerializer

U1, U2 = user_message("rename the package"), user_message("update the imports too")


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _detail(compaction: Compaction) -> dict:
    """What presentation gathers onto a compaction's row, in its one shape (the API's)."""
    return CompactionDetailSerializer(presentation.compaction_detail(compaction=compaction)).data


@pytest.mark.django_db
def test_detail_has_the_history_before_and_what_left_and_stayed(make_session):
    session = make_session(items=[U1, assistant("Renamed."), U2, assistant("Imports updated.")])
    first = do_compact_session(session_id=session.pk, strategy="local")
    history_before_second = list(
        LiveItem.objects.filter(session=session).order_by("position").values_list("item", "tokens"))
    second = do_compact_session(session_id=session.pk, strategy="remote_v1")
    detail = _detail(second)
    assert list(zip(detail["before_history"], detail["before_tokens"], strict=True)) == history_before_second
    first_detail = _detail(first)
    assert first_detail["before_history"] == [U1, assistant("Renamed."), U2, assistant("Imports updated.")]
    change = first_detail["window_change"]
    assert [k["item"] for k in change["kept"]] == [U1, U2]
    assert [k["item"] for k in change["left"]] == [assistant("Renamed."), assistant("Imports updated.")]
    assert [n["item"]["content"][0]["text"][:13] for n in change["new"]] == ["Another langu"]
    assert change["kept_tokens"] + change["new_tokens"] == sum(first_detail["replacement_tokens"])
    assert first_detail["message"].endswith(first.summary)
    assert first_detail["tokens_freed"] == first.tokens_before - first.tokens_after == first_detail["cost"]["tokens_freed"]
    (attempt,) = first_detail["attempts"]
    assert (attempt["status"], attempt["implementation"], attempt["trigger"]) == ("completed", "responses", "manual")
    assert [c.pk for c in selectors.list_compactions(session_id=session.pk)] == [first.pk, second.pk]


@pytest.mark.django_db
def test_analytics_counts_by_dimension_and_reports_failure_rate_and_latency(make_session, provider, policy):
    session = make_session(items=[U1])
    do_compact_session(session_id=session.pk, strategy="local")
    do_compact_session(session_id=session.pk, strategy="token_budget")
    Session.objects.filter(pk=session.pk).update(fault_injection={"fault": "v2_two"})
    with pytest.raises(CompactionFailed):
        do_compact_session(session_id=session.pk, strategy="remote_v2")
    CompactionAttempt.objects.filter(session=session).update(duration_ms=100)
    CompactionAttempt.objects.filter(session=session, strategy="remote_v2").update(duration_ms=900)
    rollup.rebuild()  # the durations were written past the records writer, and so past the roll-up
    stats = analytics.compaction_analytics(policy_id=policy.pk, provider_id=provider.pk)
    assert stats["attempts"] == 3
    assert stats["totals"]["status"] == {"completed": 2, "failed": 1}
    assert stats["totals"]["implementation"] == {"responses": 1, "token_budget": 1, "responses_compaction_v2": 1}
    assert stats["failure_rate"] == pytest.approx(1 / 3)
    assert stats["latency_ms"] == {"p50": 100.0, "p90": 900.0, "p99": 900.0, "count": 3}
    (day,) = stats["per_day"].values()
    assert day["trigger"] == {"manual": 3}
    completed = CompactionAttempt.objects.filter(session=session, status="completed")
    # Window tokens freed: the installed compactions' figure (the inspector's), not the attempts' analytics.
    assert stats["tokens_freed"] == sum(a.compaction.tokens_freed for a in completed)
    assert analytics.compaction_analytics(policy_id=policy.pk + 1000)["attempts"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_requested_compaction_runs_in_the_background(make_session, make_user):
    operator_user = make_user(None)  # role groups do not survive the flush of transactional tests
    session = make_session(items=[U1])
    job = do_request_compaction(session_id=session.pk, actor=operator_user, strategy="token_budget")
    assert job.status == "queued"  # handed to the in-process pool: the request returned at once
    deadline = time.monotonic() + 10
    # Done when the attempt is finished and the job has let go of the session.
    while not (CompactionAttempt.objects.filter(session=session, status="completed").exists()
               and Session.objects.filter(pk=session.pk, lease_holder="").exists()):
        assert time.monotonic() < deadline, "the queued compaction did not finish"
        time.sleep(0.02)
    (compaction,) = selectors.list_compactions(session_id=session.pk)
    assert compaction.trigger == "manual" and compaction.strategy == "token_budget"
    assert compaction.audit_entries.get().actor == operator_user


def _attempt(session, *, day: int, status: str, strategy: str = "local", duration: int | None = None,
             before: int = 1000, after: int | None = None) -> CompactionAttempt:
    compaction = None
    if status == "completed":  # an installed compaction: its window tokens are what analytics sums
        seq = Compaction.objects.filter(session=session).count() + 100
        compaction = Compaction.objects.create(
            session=session, rollout_seq=seq, trigger="manual", reason="user_requested", phase="standalone_turn",
            implementation="responses", strategy=strategy, tokens_before=before, tokens_after=after or 0,
            window_number=seq, window_id=f"w{seq}", first_window_id="w0", item_id=f"i{seq}")
    return CompactionAttempt.objects.create(
        compaction=compaction,
        session=session, trigger="manual", reason="user_requested", implementation="responses",
        phase="standalone_turn", strategy=strategy, status=status, tokens_before=before, tokens_after=after,
        duration_ms=duration, started_at=datetime(2026, 3, day, 23, 30, tzinfo=UTC),
    )


@pytest.mark.django_db
def test_analytics_per_day_savings_and_percentiles_come_from_the_database(make_session):
    session = make_session(items=[U1])
    _attempt(session, day=1, status="completed", duration=30, before=1000, after=400)
    _attempt(session, day=1, status="completed", strategy="token_budget", duration=10, before=500, after=None)
    _attempt(session, day=2, status="failed", duration=20)
    _attempt(session, day=2, status="running")  # neither finished nor timed
    rollup.rebuild()  # the rows were written past the records writer, and so past the roll-up
    stats = analytics.compaction_analytics()
    assert stats == analytics.compaction_analytics(exact=True)
    assert stats["attempts"] == 4
    assert stats["totals"]["method"] == {"local": 3, "token_budget": 1}
    assert stats["totals"]["strategy"] == {"memento": 4}
    assert list(stats["per_day"]) == ["2026-03-01", "2026-03-02"]  # UTC days, oldest first
    assert stats["per_day"]["2026-03-02"]["status"] == {"failed": 1, "running": 1}
    assert stats["per_day"]["2026-03-01"]["strategy"] == {"memento": 2}
    assert stats["tokens_freed"] == 600 + 500 and stats["tokens_freed_mean"] == 550
    assert stats["failure_rate"] == pytest.approx(1 / 3)
    assert stats["latency_ms"] == {"p50": 20.0, "p90": 30.0, "p99": 30.0, "count": 3}
    empty = analytics.compaction_analytics(since=datetime(2027, 1, 1, tzinfo=UTC))
    assert empty["attempts"] == 0 and empty["failure_rate"] is None and empty["tokens_freed_mean"] is None
    assert empty["latency_ms"] == {"p50": None, "p90": None, "p99": None, "count": 0}


@pytest.mark.django_db
def test_analytics_reads_the_same_few_result_sets_however_many_attempts_there_are(make_session,
                                                                                  django_assert_num_queries):
    session = make_session(items=[U1])
    _attempt(session, day=1, status="completed", duration=5, after=10)
    rollup.rebuild()
    with CaptureQueriesContext(connection) as few:
        analytics.compaction_analytics()
    for day in range(1, 29):
        _attempt(session, day=day, status="completed", duration=day, after=10)
    rollup.rebuild()
    with django_assert_num_queries(len(few.captured_queries)):
        analytics.compaction_analytics()
