"""`POST /api/v1/sessions/<id>/turns`: one turn against the embedded model, with auto compaction."""

from __future__ import annotations

import pytest

from compaction_app.models import Compaction
from sessions_app.models import RolloutLine
from sessions_app.rollout import lease as locks
from sessions_app.rollout import services

pytestmark = pytest.mark.django_db


def test_a_turn_returns_the_items_it_appended_and_the_session(operator_api, make_session):
    session = make_session()

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "What does main.py do?"},
                                 format="json")

    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["status"] == "completed" and data["error"] is None and data["user_input_recorded"]
    assert data["items"][0] == {"type": "message", "role": "user",
                                "content": [{"type": "input_text", "text": "What does main.py do?"}]}
    assert data["items"][-1]["role"] == "assistant" and data["final_message"].startswith("Done with:")
    assert data["sampling_requests"] == 1 and data["tool_calls"] == 0 and data["compactions"] == []
    assert data["session"]["last_seq"] == data["last_seq"] and data["session"]["tokens_in_window"] > 0
    kinds = list(RolloutLine.objects.filter(session=session, seq__gte=data["first_seq"]).values_list("kind", flat=True))
    assert kinds == ["event_msg", "turn_context", "response_item", "response_item", "event_msg", "event_msg"]
    assert services.verify_projection(session=session) == []


def test_a_session_over_its_limit_compacts_before_the_turn(operator_api, make_session, items_factory):
    filler = "Ledger entries are posted per currency, reconciled nightly and audited weekly. " * 2100
    session = make_session(items=[items_factory.user("start"), items_factory.assistant(filler)])
    assert session.tokens_in_window >= 28_800  # 90% of the fixture provider's 32k window

    data = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "next"}, format="json").json()

    assert data["status"] == "completed", data
    assert data["compactions"] == [{"reason": "context_limit", "phase": "pre_turn", "ok": True, "error": ""}]
    compaction = Compaction.objects.get(session=session)
    assert compaction.phase == "pre_turn" and data["session"]["window_number"] == 1
    compacted = RolloutLine.objects.get(session=session, kind="compacted")
    user_line = RolloutLine.objects.get(session=session, kind="response_item", payload__content__0__text="next")
    assert compacted.seq < user_line.seq
    assert services.verify_projection(session=session) == []


def test_a_provider_failure_is_a_failed_turn_recorded_in_the_rollout(operator_api, make_session):
    session = make_session(fault_injection={"fault": "context_window_exceeded"})

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hi"}, format="json")

    data = response.json()
    assert response.status_code == 200 and data["status"] == "failed"
    assert data["error"]["code"] == "context_window_exceeded" and data["user_input_recorded"]
    assert RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="error").count() == 1


def test_a_busy_session_answers_409_and_records_nothing(operator_api, session):
    before = session.last_seq
    lease = locks.acquire(session_id=session.pk, purpose="compaction")
    try:
        response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hi"}, format="json")
    finally:
        locks.release(lease)

    assert response.status_code == 409 and response.json()["error"]["code"] == "busy"
    session.refresh_from_db()
    assert session.last_seq == before


@pytest.mark.parametrize("payload", [{}, {"input": ""}, {"input": "   "}, {"input": 5}, {"text": "hi"}])
def test_a_bad_input_is_400_and_records_nothing(operator_api, session, payload):
    before = session.last_seq

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", payload, format="json")

    assert response.status_code == 400
    session.refresh_from_db()
    assert session.last_seq == before and session.lease_holder == ""


def test_unknown_session_and_missing_role(operator_api, norole_api, session):
    assert operator_api.post("/api/v1/sessions/999999/turns", {"input": "hi"}, format="json").status_code == 404
    assert norole_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "hi"}, format="json").status_code == 403


def test_each_long_text_of_a_turn_is_tokenized_once_by_the_dashboard_and_the_embedded_model(
    operator_api, make_session, monkeypatch
):
    # The dashboard counts the user message it appends and the embedded model counts the same message as its
    # input; both use the process's shared counter, which remembers long texts by content.
    import uuid

    from compaction_app.engine.tokens import counter

    session = make_session()
    # A first turn loads the session's history into the process (on PostgreSQL from jsonb, whose key order is
    # its own: a text the dashboard counted comes back as another text). The next turn's items follow along.
    first = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": "Start."}, format="json")
    assert first.status_code == 200, first.json()
    shared = counter("o200k_base")
    seen: list[str] = []
    count = shared._count_tokens
    monkeypatch.setattr(shared, "_count_tokens", lambda text: seen.append(text) or count(text))
    marker = uuid.uuid4().hex
    question = f"{marker}: " + "Explain how the ledger reconciles nightly across currencies. " * 8

    response = operator_api.post(f"/api/v1/sessions/{session.pk}/turns", {"input": question}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["sampling_requests"] == 1
    tokenized = [text for text in seen if marker in text]
    # The user message once, though both parties counted it; nothing else that carries it (the model's answer
    # may quote it) twice either.
    assert sum('"role":"user"' in text for text in tokenized) == 1, tokenized
    assert len(tokenized) == len(set(tokenized)), tokenized
