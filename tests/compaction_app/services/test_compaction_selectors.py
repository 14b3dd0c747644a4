"""Reads for the inspector and the analytics page: the history right before a compaction (rebuilt from the rollout),
what left the window and what was kept, attempts with their analytics, and the aggregates."""

from __future__ import annotations

import time

import pytest

from compaction_app.engine.items import user_message
from compaction_app.models import CompactionAttempt
from sessions_app.compactions import analytics, presentation, selectors
from sessions_app.compactions.services import CompactionFailed, do_compact_session
from sessions_app.compactions.tasks import start_compaction
from sessions_app.models import LiveItem, Session

U1, U2 = user_message("rename the package"), user_message("update the imports too")


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


@pytest.mark.django_db
def test_detail_has_the_history_before_and_what_left_and_stayed(make_session):
    session = make_session(items=[U1, assistant("Renamed."), U2, assistant("Imports updated.")])
    first = do_compact_session(session_id=session.pk, strategy="local")
    history_before_second = list(
        LiveItem.objects.filter(session=session).order_by("position").values_list("item", "tokens"))
    second = do_compact_session(session_id=session.pk, strategy="remote_v1")
    detail = presentation.compaction_detail(compaction=second)
    assert list(zip(detail["before_history"], detail["before_tokens"], strict=True)) == history_before_second
    first_detail = presentation.compaction_detail(compaction=first)
    assert first_detail["before_history"] == [U1, assistant("Renamed."), U2, assistant("Imports updated.")]
    change = first_detail["window_change"]
    assert [k["item"] for k in change["kept"]] == [U1, U2]
    assert [k["item"] for k in change["left"]] == [assistant("Renamed."), assistant("Imports updated.")]
    assert [n["item"]["content"][0]["text"][:13] for n in change["new"]] == ["Another langu"]
    assert change["kept_tokens"] + change["new_tokens"] == sum(first_detail["replacement_tokens"])
    assert first_detail["message"].endswith(first.summary)
    assert first_detail["tokens_saved"] == first.tokens_before - first.tokens_after
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
    stats = analytics.compaction_analytics(policy_id=policy.pk, provider_id=provider.pk)
    assert stats["attempts"] == 3
    assert stats["totals"]["status"] == {"completed": 2, "failed": 1}
    assert stats["totals"]["implementation"] == {"responses": 1, "token_budget": 1, "responses_compaction_v2": 1}
    assert stats["failure_rate"] == pytest.approx(1 / 3)
    assert stats["latency_ms"] == {"p50": 100.0, "p90": 900.0, "p99": 900.0, "count": 3}
    (day,) = stats["per_day"].values()
    assert day["trigger"] == {"manual": 3}
    completed = CompactionAttempt.objects.filter(session=session, status="completed")
    assert stats["tokens_saved"] == sum(a.tokens_before - a.tokens_after for a in completed)
    assert analytics.compaction_analytics(policy_id=policy.pk + 1000)["attempts"] == 0


@pytest.mark.django_db(transaction=True)
def test_start_compaction_queues_a_manual_compaction_in_the_background(make_session, make_user):
    operator_user = make_user(None)  # role groups do not survive the flush of transactional tests
    session = make_session(items=[U1])
    assert start_compaction(session_id=session.pk, actor_id=operator_user.pk, strategy="token_budget") is None
    deadline = time.monotonic() + 10
    # Done when the attempt is finished and the job has let go of the session.
    while not (CompactionAttempt.objects.filter(session=session, status="completed").exists()
               and Session.objects.filter(pk=session.pk, lease_holder="").exists()):
        assert time.monotonic() < deadline, "the queued compaction did not finish"
        time.sleep(0.02)
    (compaction,) = selectors.list_compactions(session_id=session.pk)
    assert compaction.trigger == "manual" and compaction.strategy == "token_budget"
    assert compaction.audit_entries.get().actor == operator_user
