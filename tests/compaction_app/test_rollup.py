"""The analytics roll-up (compaction_app.rollup) equals the aggregates recomputed from the records after any
sequence of the writes that change what analytics counts: compactions completed, failed, cancelled, discarded and
left running by a dead worker, rollbacks and redos, retention scored later, re-read tax, imported compactions, and
sessions switching policy and provider between them. Checked through the analytics API a user calls, all time
(from the roll-up) against the exact recomputation, unfiltered and by policy and provider."""

from __future__ import annotations

from datetime import date
from io import StringIO

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction_app import records, rollup
from compaction_app.engine.items import user_message
from compaction_app.models import (
    AttemptRollup,
    Compaction,
    CompactionAttempt,
    CompactionPolicy,
    CompactionRollup,
    LatencyRollup,
    Provider,
)
from sessions_app.compactions import retention
from sessions_app.compactions.analytics import compaction_analytics
from sessions_app.compactions.rollback import RollbackRefused, do_redo_compaction, do_rollback_compaction
from sessions_app.compactions.services import CompactionFailed, do_compact_session
from sessions_app.models import Session
from sessions_app.web.api.analytics import RETENTION_TABLES, AnalyticsSerializer

pytestmark = pytest.mark.django_db

STEP = st.one_of(
    st.tuples(st.just("compact"), st.sampled_from(["local", "token_budget", "remote_v1"])),
    st.tuples(st.just("fail"), st.just("remote_v2")),
    st.tuples(st.just("rollback"), st.integers(0, 20)),
    st.tuples(st.just("redo"), st.integers(0, 20)),
    st.tuples(st.just("cancel"), st.integers(0, 5_000)),
    st.tuples(st.just("discard"), st.integers(0, 5_000)),
    st.tuples(st.just("stale"), st.integers(0, 5_000)),
    st.tuples(st.just("score"), st.integers(0, 20)),
    st.tuples(st.just("reread"), st.integers(1, 500)),
    st.tuples(st.just("switch"), st.integers(0, 3)),
    st.tuples(st.just("import"), st.integers(1, 3)),
)


def _exact(*, policy_id=None, provider_id=None) -> dict:
    data = compaction_analytics(policy_id=policy_id, provider_id=provider_id, exact=True)
    data["retention"] = {by: retention.retention_rollup(by=by, exact=True) for by in RETENTION_TABLES}
    data["archived_sessions"] = 0  # (this test archives nothing: tests/sessions_app/archive/test_analytics.py)
    return AnalyticsSerializer({"period": "", **data}).data


def _rounded(answer):
    """JSON as a user reads it, the mean retention to 9 places (a running float sum against AVG)."""
    if isinstance(answer, dict):
        return {
            k: (round(v, 9) if k == "retention" and isinstance(v, float) else _rounded(v))
            for k, v in answer.items()
        }
    if isinstance(answer, list):
        return [_rounded(v) for v in answer]
    if isinstance(answer, date):
        return answer.isoformat()
    return answer


def _running_attempt(session) -> CompactionAttempt:
    session.refresh_from_db()
    return records.start_attempt(
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


def run_steps(steps, *, make_session, operator_api, policy, provider):
    """A new session with `steps` applied, switching between `policy` / `provider` and a second of each; answers
    (session, the other policy, the other provider)."""
    other_policy, _ = CompactionPolicy.objects.get_or_create(name="other-policy")
    other_provider, _ = Provider.objects.get_or_create(
        name="other-provider",
        defaults={
            "base_url": Provider.EMBEDDED,
            "model": "sim-1",
            "context_window": 32000,
            "remote_compaction": Provider.RemoteCompaction.V2,
        },
    )
    session = make_session(items=[user_message(f"task {n}: rename the package") for n in range(6)])
    compactions: list[Compaction] = []
    for step in steps:
        _apply(
            step,
            session=session,
            operator_api=operator_api,
            policies=[policy, other_policy],
            providers=[provider, other_provider],
            compactions=compactions,
        )
    return session, other_policy, other_provider


def _apply(step, *, session, operator_api, policies, providers, compactions):
    kind, arg = step
    if kind == "compact":
        compactions.append(do_compact_session(session_id=session.pk, strategy=arg))
    elif kind == "fail":
        Session.objects.filter(pk=session.pk).update(fault_injection={"fault": "v2_two"})
        with pytest.raises(CompactionFailed):
            do_compact_session(session_id=session.pk, strategy=arg)
        Session.objects.filter(pk=session.pk).update(fault_injection={})
    elif kind in ("rollback", "redo") and compactions:
        target = compactions[arg % len(compactions)]
        try:
            (do_rollback_compaction if kind == "rollback" else do_redo_compaction)(compaction_id=target.pk)
        except RollbackRefused:
            pass
    elif kind == "cancel":
        records.cancel_attempt(attempt_id=_running_attempt(session).pk)  # a stopped turn's: interrupted
    elif kind == "discard":
        records.discard_attempt(attempt_id=_running_attempt(session).pk)
    elif kind == "stale":
        _running_attempt(session)
        _running_attempt(session)
        records.mark_stale_attempts(session_id=session.pk)
    elif kind == "score" and compactions:
        target = compactions[arg % len(compactions)]
        records.set_retention(
            compaction_id=target.pk, retention={"score": arg / 20}, retention_score=arg / 20
        )
    elif kind == "reread" and compactions:
        records.add_reread_tokens(compaction_id=compactions[arg % len(compactions)].pk, tokens=arg)
    elif kind == "switch":
        # The next attempts run under another policy and provider, the earlier ones keep theirs.
        Session.objects.filter(pk=session.pk).update(
            policy=policies[arg % 2], provider=providers[arg // 2 % 2], model=f"model-{arg}"
        )
    elif kind == "import":
        session.refresh_from_db()
        base = 10_000 + Compaction.objects.filter(session=session).count() * 10
        records.record_imported_compactions(
            compactions=[
                Compaction(
                    session=session,
                    rollout_seq=base + n,
                    trigger="auto",
                    reason="context_limit",
                    phase="pre_turn",
                    implementation="responses",
                    strategy="remote",
                    tokens_before=9_000,
                    tokens_after=1_000 + n,
                    window_number=base + n,
                    window_id=f"imp{base + n}",
                    first_window_id="w0",
                    item_id=f"imported-{base + n}",
                    rolled_back=n == 2,
                )
                for n in range(arg)
            ]
        )


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=4, max_size=14))
def test_the_rollup_equals_the_recomputed_analytics_after_any_sequence_of_writes(
    make_session, operator_api, provider, policy, no_engine_sleeps, steps
):
    rollup.rebuild()  # hypothesis runs every example in the one test transaction: start from its records
    session, other_policy, other_provider = run_steps(
        steps, make_session=make_session, operator_api=operator_api, policy=policy, provider=provider
    )
    filters = [
        {},
        {"policy": policy.pk},
        {"policy": other_policy.pk},
        {"provider": other_provider.pk},
        {"policy": policy.pk, "provider": provider.pk},
    ]
    for chosen in filters:
        answer = operator_api.get("/api/v1/analytics", {"period": "", **chosen})
        assert answer.status_code == 200
        got = answer.json()
        expected = dict(_exact(policy_id=chosen.get("policy"), provider_id=chosen.get("provider")))
        if chosen:  # the retention tables have no policy or provider filter: checked unfiltered
            got.pop("retention"), expected.pop("retention")
        assert _rounded(got) == _rounded(expected), chosen
    kept = _rollup_rows()
    rollup.rebuild()
    assert _rollup_rows() == kept  # the rows kept as written are the rows a recount makes


def _rollup_rows() -> dict:
    """Every roll-up row that counts something, with its sums (retention sums rounded)."""
    rows = {}
    for model, key in (
        (AttemptRollup, rollup.ATTEMPT),
        (LatencyRollup, rollup.LATENCY),
        (CompactionRollup, rollup.COMPACTION),
    ):
        for values in model.objects.values(*rollup.KEYS[key], *rollup.SUMS[key]):
            sums = tuple(round(values[s], 9) for s in rollup.SUMS[key])
            if any(sums):
                rows[(key, tuple(values[k] for k in rollup.KEYS[key]))] = sums
    return rows


def test_the_latency_buckets_hold_two_significant_digits():
    assert [rollup.latency_bucket(d) for d in (0, 7, 99, 100, 109, 110, 999, 1000, 1099, 12_345)] == [
        0,
        7,
        99,
        100,
        100,
        110,
        990,
        1000,
        1000,
        12_000,
    ]
    assert [rollup.bucket_end(b) for b in (7, 100, 990, 1000, 12_000)] == [7, 109, 999, 1099, 12_999]


def test_the_percentiles_over_all_time_are_exact_inside_a_bucket(make_session):
    session = make_session(items=[user_message("x")])
    for duration in (1000, 1003, 1001, 1050, 1099, 20, 5000):
        attempt = _running_attempt(session)
        records.fail_attempt(attempt_id=attempt.pk, kind="k", message="m")
        CompactionAttempt.objects.filter(pk=attempt.pk).update(
            duration_ms=duration
        )  # (a test's own duration)
    rollup.rebuild()
    assert (
        compaction_analytics()["latency_ms"]
        == compaction_analytics(exact=True)["latency_ms"]
        == {"p50": 1003.0, "p90": 5000.0, "p99": 5000.0, "count": 7}
    )


def test_the_analytics_api_refuses_a_bad_filter_with_a_400(operator_api):
    response = operator_api.get("/api/v1/analytics", {"period": "12"})
    assert response.status_code == 400 and response.json()["error"]


def test_the_rebuild_command_recounts_rows_written_past_the_records_writer(make_session):
    session = make_session(items=[user_message("x")])
    attempt = _running_attempt(session)
    CompactionAttempt.objects.filter(pk=attempt.pk).update(status="failed", duration_ms=42)  # (a bulk load's)
    assert compaction_analytics()["latency_ms"]["count"] == 0
    out = StringIO()
    call_command("rebuild_analytics_rollup", stdout=out)
    assert out.getvalue().startswith("counted 1 attempts and 0 compactions")
    assert compaction_analytics() == compaction_analytics(exact=True)
    assert compaction_analytics()["latency_ms"] == {"p50": 42.0, "p90": 42.0, "p99": 42.0, "count": 1}
