"""Replaying a session under another policy: a new session linked to the original gets the original's turns in
order, with the new policy's pre-turn auto compaction between turns (spec §2.4 step 1b), and the two compare."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.engine.items import is_real_user_message
from compaction_app.models import AuditEntry, CompactionPolicy
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout import selectors
from sessions_app.rollout.services import verify_projection
from sessions_app.transfer.replay import do_replay_session, limit_reached


@pytest.fixture
def tight_policy(db):
    return CompactionPolicy.objects.create(name="tight", auto_compact_token_limit=600, strategy="remote_v1")


def _real_user_texts(session):
    rows = RolloutLine.objects.filter(session=session, kind="response_item").order_by("seq")
    return [r.payload for r in rows if is_real_user_message(r.payload)]


def test_a_replay_under_a_tighter_threshold_compacts_where_the_original_did_not(
    make_session, add_turn, tight_policy, operator_user
):
    original = make_session(base_instructions="Be brief.")
    for n in range(6):
        add_turn(original, n, size=80)
    assert original.compaction_count == 0

    result = do_replay_session(session_id=original.pk, policy=tight_policy, actor=operator_user)

    replay = Session.objects.get(pk=result.replay.pk)
    assert (replay.origin_id, replay.source, replay.policy_id) == (original.pk, "replay", tight_policy.pk)
    assert replay.base_instructions == "Be brief."
    assert result.turns == 6 and result.compactions >= 2 and not result.failures
    assert replay.compaction_count == result.compactions
    # every user turn of the original reached the replay's rollout, in order
    assert _real_user_texts(replay) == _real_user_texts(original)
    assert verify_projection(session=replay) == []
    comparison = result.as_dict()["comparison"]
    assert comparison["original"]["compactions"] == 0
    assert comparison["replay"]["compactions"] == result.compactions
    assert comparison["replay"]["peak_tokens"] < comparison["original"]["peak_tokens"]
    assert comparison["replay"]["tokens_saved"] > 0 and comparison["original"]["tokens_saved"] == 0
    assert AuditEntry.objects.filter(action="replay", session=replay, actor=operator_user).exists()


def test_each_compaction_of_the_replay_ran_only_after_the_limit_was_reached(make_session, add_turn, tight_policy):
    original = make_session()
    for n in range(5):
        add_turn(original, n, size=80)
    calls = []

    def recording_compact(**kwargs):
        session = Session.objects.select_related("provider", "policy").get(pk=kwargs["session_id"])
        calls.append((kwargs["trigger"], kwargs["phase"], limit_reached(session)))
        from sessions_app.compactions.services import do_compact_session

        return do_compact_session(**kwargs)

    do_replay_session(session_id=original.pk, policy=tight_policy, compact=recording_compact)

    assert calls and all(call == ("auto", "pre_turn", True) for call in calls)


def test_the_original_s_compactions_are_not_replayed(make_session, add_turn, tight_policy, compact_original):
    original = make_session()
    add_turn(original, 1, size=80)
    compact_original(original)
    add_turn(original, 2, size=80)
    loose = CompactionPolicy.objects.create(name="loose")

    result = do_replay_session(session_id=original.pk, policy=loose)

    assert result.compactions == 0 and result.replay.compaction_count == 0
    # without compactions the replay keeps every item the original ever appended
    items = list(RolloutLine.objects.filter(session=original, kind="response_item").values_list("payload", flat=True))
    assert selectors.live_items(session=result.replay) == items


@pytest.fixture
def compact_original():
    from sessions_app.compactions.services import do_compact_session

    return lambda session: do_compact_session(session_id=session.pk, strategy="remote_v1")


def test_an_imported_codex_session_replays_and_compares_over_the_api(operator_api, rollout_bytes, tight_policy, provider):
    imported = operator_api.post("/api/v1/sessions/import", {
        "file": SimpleUploadedFile("c.jsonl", rollout_bytes("compactions.jsonl")), "policy": tight_policy.pk,
    }).json()["session"]

    response = operator_api.post(f"/api/v1/sessions/{imported}/replay", {"policy": tight_policy.pk}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["original"] == imported and body["comparison"]["original"]["compactions"] == 2
    again = operator_api.get(f"/api/v1/sessions/{body['replay']}/comparison")
    assert again.status_code == 200 and again.json()["replay"]["session"] == body["replay"]
    assert operator_api.get(f"/api/v1/sessions/{imported}/comparison").status_code == 400


def test_replay_with_an_unknown_policy_changes_nothing(operator_api, session):
    sessions = Session.objects.count()
    response = operator_api.post(f"/api/v1/sessions/{session.pk}/replay", {"policy": 999999}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "policy: policy 999999 does not exist"
    assert Session.objects.count() == sessions
