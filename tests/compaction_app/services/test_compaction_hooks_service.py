"""PreCompact / PostCompact hooks configured on the policy (spec §7): a stop interrupts the compaction and changes
nothing; every run is recorded as a HookRun of the attempt; disabled hooks and non-matching triggers do not run."""

from __future__ import annotations

import pytest

from compaction_app.models import Compaction, CompactionAttempt, Hook, HookRun
from sessions_app.compactions.services import CompactionInterrupted, do_compact_session
from sessions_app.models import RolloutLine
from tests.fakes.scripted_provider import Reply, ScriptedProvider

CALLS: list[dict] = []


def stop_for_freeze(request: dict) -> dict:
    return {"continue": False, "stopReason": "change freeze until Monday"}


def record_call(request: dict) -> dict:
    CALLS.append(request)
    return {"continue": True}


def hook(policy, name: str, event: str, target: str, **fields) -> Hook:
    created = Hook.objects.create(name=name, event=event, kind=fields.pop("kind", "callable"), target=target,
                                  **fields)
    policy.hooks.add(created)
    return created


HERE = "tests.compaction_app.services.test_compaction_hooks_service"


@pytest.mark.django_db
def test_a_stopping_callable_pre_compact_hook_interrupts_and_changes_nothing(session, policy, observable_state):
    stopper = hook(policy, "freeze", "pre_compact", f"{HERE}.stop_for_freeze")
    before, seq = observable_state(session), session.last_seq
    with pytest.raises(CompactionInterrupted) as stopped:
        do_compact_session(session_id=session.pk, strategy="local")
    assert stopped.value.stop_reason == "change freeze until Monday"
    attempt = CompactionAttempt.objects.get(pk=stopped.value.attempt.pk)
    assert attempt.status == "interrupted" and attempt.error_kind == "interrupted"
    (run,) = HookRun.objects.filter(attempt=attempt)
    assert (run.hook_id, run.event, run.status, run.stop_reason) == (
        stopper.pk, "pre_compact", "stopped", "change freeze until Monday")
    (line,) = RolloutLine.objects.filter(session=session, seq__gt=seq)
    assert line.kind == "event_msg" and line.payload["type"] == "compaction_interrupted"
    assert not Compaction.objects.exists()
    assert observable_state(session) == before


@pytest.mark.django_db
def test_a_webhook_answering_continue_false_interrupts_with_its_stop_reason(session, policy, observable_state):
    webhook = ScriptedProvider([Reply.json(200, {"continue": False, "stopReason": "compliance review"})])
    before = observable_state(session)
    with webhook.serve(base_path="") as base_url:
        hook(policy, "review", "pre_compact", f"{base_url}/hooks/pre", kind="webhook")
        with pytest.raises(CompactionInterrupted, match="compliance review"):
            do_compact_session(session_id=session.pk, strategy="local")
    (request,) = webhook.requests
    assert request.path == "/hooks/pre"
    body = request.json
    assert (body["hook_event_name"], body["trigger"], body["session_id"]) == (
        "PreCompact", "manual", str(session.thread_id))
    assert (body["reason"], body["phase"], body["implementation"]) == ("user_requested", "standalone_turn",
                                                                       "responses")
    assert HookRun.objects.get().status == "stopped"
    assert observable_state(session) == before


@pytest.mark.django_db
def test_passing_hooks_run_before_and_after_and_are_recorded_on_the_attempt(session, policy):
    CALLS.clear()
    hook(policy, "a-pre", "pre_compact", f"{HERE}.record_call")
    hook(policy, "b-post", "post_compact", f"{HERE}.record_call")
    hook(policy, "c-disabled", "pre_compact", f"{HERE}.stop_for_freeze", enabled=False)
    hook(policy, "d-auto-only", "pre_compact", f"{HERE}.stop_for_freeze", matcher="auto")
    result = do_compact_session(session_id=session.pk, strategy="token_budget")
    assert [c["hook_event_name"] for c in CALLS] == ["PreCompact", "PostCompact"]
    assert CALLS[1]["status"] == "completed"
    runs = HookRun.objects.filter(attempt__compaction=result).order_by("pk")
    assert [(r.hook_name, r.event, r.status) for r in runs] == [
        ("a-pre", "pre_compact", "completed"), ("b-post", "post_compact", "completed")]


@pytest.mark.django_db
def test_an_operator_sees_only_the_decision_and_a_short_reason_of_a_webhook_answer(session, policy, operator_api):
    """Issue 27: whatever else a webhook target answers (an internal page, data) is not stored or shown."""
    answer = {"continue": True, "stopReason": "line one\nline two " + "x" * 1000, "internal": "db-password=hunter2"}
    webhook = ScriptedProvider([Reply.json(200, answer)])
    with webhook.serve(base_path="") as base_url:
        hook(policy, "review", "pre_compact", f"{base_url}/hooks/pre", kind="webhook")
        response = operator_api.post(f"/api/v1/sessions/{session.pk}/compact", {"strategy": "local"}, format="json")
    assert response.status_code in (200, 201), response.content
    shown = operator_api.get(f"/api/v1/sessions/{session.pk}/attempts").content.decode()
    assert "hunter2" not in shown and "internal" not in shown
    (run,) = HookRun.objects.all()
    kept = run.output["response"]
    assert set(kept) == {"continue", "stopReason"} and kept["continue"] is True
    assert kept["stopReason"].startswith("line one line two x") and len(kept["stopReason"]) <= 200


@pytest.mark.django_db
def test_a_webhook_target_the_deployment_no_longer_allows_receives_nothing(session, policy, settings):
    """Issue 27: a webhook saved under an older rule (here: loopback listed) is checked again before it is sent;
    refused, it is a failed run and the compaction goes on (spec §7)."""
    webhook = ScriptedProvider([Reply.json(200, {"continue": False, "stopReason": "never read"})])
    with webhook.serve(base_path="") as base_url:
        hook(policy, "review", "pre_compact", f"{base_url}/hooks/pre", kind="webhook")
        settings.COMPACTWEB_OUTBOUND_ALLOW = []
        result = do_compact_session(session_id=session.pk, strategy="local")
    assert webhook.requests == []
    (run,) = HookRun.objects.filter(attempt__compaction=result)
    assert run.status == "failed" and run.output["error"].startswith("webhook target refused")
    assert "COMPACTWEB_OUTBOUND_ALLOW" in run.output["error"]
