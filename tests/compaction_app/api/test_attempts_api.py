"""Analytics and observability through the API (spec §10): every attempt, also the failed and interrupted ones that
produced no compaction, is readable with every analytics field, the error text and the provider's HTTP status;
compactweb's method and Codex's `strategy` (`memento`) are two fields; a compaction shows its injection mode."""

from __future__ import annotations

import pytest

from compaction_app.models import CompactionAttempt
from tests.fakes.scripted_api import compaction_reply
from tests.fakes.scripted_provider import Reply, assistant

pytestmark = pytest.mark.django_db

ITEMS = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
         assistant("on it")]
ANALYTICS_FIELDS = {
    "thread_id", "turn_id", "trigger", "reason", "implementation", "phase", "strategy", "status",
    "codex_error_kind", "codex_error_http_status_code", "active_context_tokens_before",
    "active_context_tokens_after", "retained_image_count", "compaction_summary_tokens", "cached_input_tokens",
    "started_at", "completed_at", "duration_ms",
}


def test_a_failed_attempt_without_a_compaction_is_listed_and_readable_with_its_analytics(scripted_sessions):
    api, script = scripted_sessions.api, scripted_sessions.script
    session = scripted_sessions.create(items=ITEMS)
    script.add(Reply.error(503, {"error": {"code": "server_is_overloaded", "message": "try later"}}))
    failed = api.post(f"/api/v1/sessions/{session['id']}/compact", {"method": "remote_v2"}, format="json")
    assert failed.status_code == 502
    script.add(compaction_reply("ENC"))
    assert api.post(f"/api/v1/sessions/{session['id']}/compact", {"method": "remote_v2"},
                    format="json").status_code == 201

    listing = api.get(f"/api/v1/sessions/{session['id']}/attempts").json()
    only_failed = api.get(f"/api/v1/sessions/{session['id']}/attempts?status=failed").json()
    detail = api.get(f"/api/v1/attempts/{failed.json()['error']['attempt_id']}").json()

    assert [a["status"] for a in listing] == ["completed", "failed"]
    assert [a["id"] for a in only_failed] == [detail["id"]]
    assert detail["compaction"] is None and detail["method"] == "remote_v2" and detail["strategy"] == "memento"
    assert detail["error"]["http_status"] == 503 and "try later" in detail["error"]["message"]
    analytics = detail["analytics"]
    assert set(analytics) == ANALYTICS_FIELDS
    assert analytics["status"] == "failed" and analytics["codex_error_http_status_code"] == 503
    assert analytics["implementation"] == "responses_compaction_v2" and analytics["strategy"] == "memento"
    assert analytics["thread_id"] == session["thread_id"]


def test_an_interrupted_attempt_is_readable(scripted_sessions):
    session = scripted_sessions.create(items=ITEMS)
    CompactionAttempt.objects.create(
        session_id=session["id"], trigger="manual", reason="user_requested", implementation="responses",
        phase="standalone_turn", strategy="local", status="interrupted", error_kind="interrupted",
        error_message="the worker running this compaction stopped before it finished",
        started_at="2026-01-01T00:00:00Z",
    )

    (attempt,) = scripted_sessions.api.get(f"/api/v1/sessions/{session['id']}/attempts?status=interrupted").json()

    assert attempt["error"]["message"].startswith("the worker running this compaction stopped")
    assert attempt["analytics"]["status"] == "interrupted"


def test_attempt_lookups_refuse_unknown_ids_and_statuses(scripted_sessions):
    api = scripted_sessions.api
    session = scripted_sessions.create()
    assert api.get("/api/v1/attempts/999999").status_code == 404
    assert api.get("/api/v1/sessions/999999/attempts").status_code == 404
    bad = api.get(f"/api/v1/sessions/{session['id']}/attempts?status=nope")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid"


def test_a_compaction_names_its_method_codex_strategy_and_injection_mode(scripted_sessions):
    api, script = scripted_sessions.api, scripted_sessions.script
    session = scripted_sessions.create(items=ITEMS)
    script.add(compaction_reply("ENC"))

    body = api.post(f"/api/v1/sessions/{session['id']}/compact", {"strategy": "remote_v2"}, format="json").json()

    assert (body["method"], body["strategy"], body["injection"]) == ("remote_v2", "memento", "do_not_inject")
    listed = api.get(f"/api/v1/sessions/{session['id']}/compactions").json()[0]
    assert (listed["method"], listed["strategy"], listed["injection"]) == ("remote_v2", "memento", "do_not_inject")


def test_a_mid_turn_compaction_shows_before_last_user_message(scripted_sessions):
    from tests.fakes.scripted_api import items_reply, text_reply

    script = scripted_sessions.script
    session = scripted_sessions.create(policy_fields={"auto_compact_token_limit": 2_000})
    call = {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}
    script.add(items_reply(call, input_tokens=5_000), compaction_reply("ENC"), text_reply("done"))
    scripted_sessions.turn(session["id"])

    (compaction,) = scripted_sessions.api.get(f"/api/v1/sessions/{session['id']}/compactions").json()
    assert compaction["injection"] == "before_last_user_message" and compaction["phase"] == "mid_turn"


def test_method_and_its_old_name_must_agree(scripted_sessions):
    session = scripted_sessions.create(items=ITEMS)
    response = scripted_sessions.api.post(f"/api/v1/sessions/{session['id']}/compact",
                                          {"method": "local", "strategy": "remote_v2"}, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"]


def test_analytics_counts_by_method_and_by_codex_strategy(scripted_sessions):
    from sessions_app.compactions.analytics import compaction_analytics

    api, script = scripted_sessions.api, scripted_sessions.script
    session = scripted_sessions.create(items=ITEMS)
    script.add(compaction_reply("ENC"))
    api.post(f"/api/v1/sessions/{session['id']}/compact", {"method": "remote_v2"}, format="json")

    totals = compaction_analytics()["totals"]
    assert totals["method"] == {"remote_v2": 1} and totals["strategy"] == {"memento": 1}


def test_the_analytics_page_and_the_inspector_name_method_and_codex_strategy_apart(scripted_sessions, client,
                                                                                  operator_user):
    api, script = scripted_sessions.api, scripted_sessions.script
    session = scripted_sessions.create(items=ITEMS)
    script.add(compaction_reply("ENC"))
    compaction = api.post(f"/api/v1/sessions/{session['id']}/compact", {"method": "remote_v2"}, format="json").json()
    client.force_login(operator_user)

    analytics = client.get("/analytics/?by=method").content.decode()
    inspector = client.get(f"/compactions/{compaction['id']}/").content.decode()

    assert "By method (compactweb)" in analytics and "By Codex strategy (analytics)" in analytics
    assert "memento" in analytics
    assert ">Method</dt><dd>remote compaction v2<" in inspector  # the method's label (h17's wording)
    assert ">Codex strategy</dt><dd>memento<" in inspector
    assert ">Injection</dt><dd>not injected (a new window starts without it)<" in inspector  # words, not the code
