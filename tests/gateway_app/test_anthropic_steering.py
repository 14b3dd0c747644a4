"""Issue 44: what compactweb decides for a Claude Code session through the Anthropic gateway reaches its
requests as it reaches Codex's (gateway_app.steering, docs/gateway.md "Operator actions"): an operator's
"compact at the next request", support's rollback of a compaction, pins once; and compactweb mode's own
failures and triggers are said right. Each through the gateway's HTTP path, the upstream a recording simulated
model that speaks the Messages API."""

from __future__ import annotations

import json

import pytest

from compaction_app.engine.items import message_text
from compaction_app.models import Compaction, CompactionPolicy
from gateway_app import anthropic_compaction
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayAttempt
from sessions_app.models import Session
from tests.gateway_app.test_anthropic_gateway import Claude, claude_route

pytestmark = pytest.mark.django_db(transaction=True)


def test_compactweb_modes_own_failure_is_a_500_api_error_without_the_exceptions_text(anthropic_upstream):
    """The policy's summary call cannot reach its model (the route's Provider is not reachable from compactweb
    itself): Claude Code gets Anthropic's 500 `api_error`, which it retries, with the gateway's fixed message; the
    failure's text (host names, the model's answer) is the operator's: in the session's attempt, not the answer."""
    policy = CompactionPolicy.objects.create(name="claude-unreachable", strategy="local")
    route = claude_route(mode="compactweb", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    response = claude.post([*claude.messages, {"role": "user", "content": [
        {"type": "text", "text": "Your task is to create a detailed summary of the conversation so far."}]}])
    assert response.status_code == 500, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    assert error["error"]["message"] == anthropic_compaction.INTERNAL_FAILURE
    assert "upstream.invalid" not in response.text
    attempt = GatewayAttempt.objects.filter(status=500).get()
    assert "upstream.invalid" in attempt.error or "could not compact" in attempt.error
    assert not Compaction.objects.filter(session=Session.objects.get(source="gateway")).exists()


SUMMARY_PROMPT = "Your task is to create a detailed summary of the conversation so far."


def test_claude_codes_mid_turn_summary_request_without_the_newest_answer_is_no_retry(anthropic_upstream):
    """Claude Code 2.1.332 compacting mid-turn (seen with the real CLI): its summary request is its previous
    request with the summary prompt added to the last user message (the tool result), without the answer to it
    (a tool call it has run); its next request is the summary, then that call and its result. Recorded: one
    compaction, no `client_retry` rollback (nothing was retried), and the history after it is what Claude Code
    sent next."""
    from gateway_app.recording import CLIENT_RETRY
    from sessions_app.models import RolloutLine
    from tests.gateway_app.test_anthropic_gateway import CONTINUED, items_of
    from tests.gateway_app.test_recording import live, wire

    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    # (a prompt the simulated model answers with three tool calls, one at a time)
    claude.messages = [{"role": "user", "content": [{"type": "text", "text": "now write the docs for the loader module"}]}]
    answer = claude.ask(claude.messages)
    while True:  # to the first answer to a tool result that is a tool call again: mid-turn
        calls = [b for b in answer if b["type"] == "tool_use"]
        assert calls, answer
        if len(claude.messages) > 1:
            break
        claude.messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c["id"], "content": "ran it"} for c in calls]}]
        answer = claude.ask(claude.messages)  # the newest answer: a tool call Claude Code runs, then compacts
    with_prompt = [*claude.messages[:-1], {"role": "user", "content": [
        *claude.messages[-1]["content"], {"type": "text", "text": SUMMARY_PROMPT}]}]
    summary = "".join(b.get("text", "") for b in claude.ask(with_prompt))
    claude.messages = [{"role": "user", "content": [{"type": "text", "text": CONTINUED + summary}]},
                       {"role": "assistant", "content": answer},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": c["id"],
                                                     "content": "ran it too"} for c in calls]}]
    claude.ask(claude.messages)
    session = Session.objects.get(source="gateway")
    sources = [r.payload.get("source") for r in RolloutLine.objects.filter(session=session, kind="rollback")]
    assert CLIENT_RETRY not in sources, sources
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.trigger == "auto" and summary in compaction.summary
    assert [wire(i) for i in live(session)][:len(items_of(claude.messages))] == items_of(claude.messages)


def _pinned_compactweb_claude(client, support_user):
    """A Claude Code session on a compactweb route (local summarisation) with a pin, compacted once by the
    policy; the forwarded requests reach the recording upstream."""
    policy = CompactionPolicy.objects.create(name="claude-compactweb-pins", strategy="local")
    route = claude_route(mode="compactweb", base_url="embedded", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    session = Session.objects.get(source="gateway")
    client.force_login(support_user)
    client.post(f"/sessions/{session.pk}/pins/", {"kind": "constraint", "text": "never touch prod.yaml"})
    claude.turn("now write the docs for the loader module")
    return claude, session


def test_compactweb_mode_sends_the_pin_upstream_once_after_claude_code_continues_from_the_summary(
        anthropic_upstream, client, support_user):
    """The pinned block reaches the upstream once per request: as the block the gateway puts in, not again inside
    the summary compactweb answered with, nor restated by the policy's summary as a request of the user's (the
    summarising call sends it as `system`, not as user text)."""
    from tests.gateway_app.test_anthropic_gateway import upstream_bodies
    claude, session = _pinned_compactweb_claude(client, support_user)
    claude.compact()
    for text in ("add a changelog entry for the parser fix", "go on"):
        claude.turn(text)
        received = json.dumps(upstream_bodies(anthropic_upstream)[-1]["messages"])
        assert received.count("never touch prod.yaml") == 1, received


def _text(messages) -> str:
    """Every text and tool result of a request's messages, as read (json.dumps would escape the newlines)."""
    from tests.gateway_app.test_anthropic_gateway import items_of
    return "\n".join(i.get("output") if i.get("type") == "function_call_output" else message_text(i)
                     for i in items_of(messages) if i.get("type") != "function_call")


def _wire(items):
    from gateway_app import wire
    return [wire.wire_form(i) for i in items]


def test_compact_at_the_next_request_compacts_claude_codes_history_before_forwarding_it(anthropic_upstream, client,
                                                                                        operator_user):
    """An operator's "compact at the next request" on a Claude Code session: the route policy compacts before the
    next request goes on, the upstream gets the compacted history (Claude Code still sends its whole one), and
    keeps getting it at every later request (a substitution); the record is what the upstream received, grown by
    extension."""
    from tests.gateway_app.test_anthropic_gateway import items_of, upstream_bodies
    from tests.gateway_app.test_recording import live
    policy = CompactionPolicy.objects.create(name="claude-operator", strategy="local")
    route = claude_route(base_url="embedded", policy=policy)  # (the policy's summary from the embedded model)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.turn("now write the docs for the loader module")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    assert client.post(f"/gateway-sessions/{session.pk}/compact/").status_code == 302
    asked = len(upstream_bodies(anthropic_upstream))
    claude.turn("add a changelog entry for the parser fix")
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.trigger == "manual" and compaction.summary
    first = upstream_bodies(anthropic_upstream)[asked]
    sent = claude.sent[-len(upstream_bodies(anthropic_upstream)) + asked]
    assert compaction.summary in _text(first["messages"])  # the upstream got the compacted history ...
    assert compaction.summary not in _text(sent["messages"])  # ... Claude Code sent its whole one
    assert len(items_of(first["messages"])) < len(items_of(sent["messages"]))
    claude.turn("go on")
    last = upstream_bodies(anthropic_upstream)[-1]
    assert compaction.summary in _text(last["messages"])  # every later request too
    assert compaction.summary not in _text(claude.sent[-1]["messages"])
    assert Compaction.objects.filter(session=session).count() == 1
    from sessions_app.models import RolloutLine
    assert not RolloutLine.objects.filter(session=session, kind="rollback").exists()  # no rewrite: an extension
    assert _wire(live(session))[:len(items_of(last["messages"]))] == items_of(last["messages"])


def test_compact_at_the_next_request_on_a_claude_code_session_says_claude_code_not_codex(anthropic_upstream, client,
                                                                                       operator_user):
    """The operator's confirmation, the notice the gateway gives once it ran the compaction (the audit entry's
    reason, shown on the session's gateway card) and the card itself name the session's client: Claude Code."""
    import re

    from compaction_app.models import AuditEntry
    policy = CompactionPolicy.objects.create(name="claude-operator-notice", strategy="local")
    route = claude_route(base_url="embedded", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.turn("now write the docs for the loader module")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    asked = client.post(f"/gateway-sessions/{session.pk}/compact/", follow=True).content.decode()
    assert "before forwarding Claude Code&#x27;s next request" in asked, asked
    claude.turn("add a changelog entry for the parser fix")
    entry = AuditEntry.objects.get(session=session, action="gateway_compaction")
    assert entry.reason.startswith("The gateway compacted Claude Code's history before forwarding its next "
                                   "request ("), entry.reason
    assert "Codex" not in entry.reason
    card = re.search(r'<section id="gateway-card".*?</section>', client.get(f"/sessions/{session.pk}/").content
                     .decode(), re.S).group(0)
    assert "Claude Code via the gateway" in card and "The gateway compacted Claude Code" in card
    assert "Codex" not in card, card


@pytest.mark.parametrize("mode", ["upstream", "compactweb"])
def test_support_rolls_back_claude_codes_compaction_and_the_upstream_gets_the_history_before_it(
        anthropic_upstream, client, support_user, mode):
    """Support rolls back a compaction of Claude Code's, made by the upstream's summary (upstream mode) or answered
    with the policy's (compactweb mode, Claude Code going on from it in its own framing): Claude Code keeps sending
    its summary, the upstream gets the history before the compaction instead, with what came after it."""
    from tests.gateway_app.test_anthropic_gateway import CONTINUED, items_of, upstream_bodies
    from tests.gateway_app.test_recording import live
    if mode == "upstream":
        route = claude_route()
    else:
        policy = CompactionPolicy.objects.create(name="claude-compactweb-rollback", strategy="local")
        route = claude_route(mode="compactweb", base_url="embedded", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.turn("now write the docs for the loader module")
    before = items_of(claude.messages)
    claude.compact()
    claude.turn("add a changelog entry for the parser fix")
    session = Session.objects.get(source="gateway")
    compaction = Compaction.objects.get(session=session)
    client.force_login(support_user)
    client.post(f"/compactions/{compaction.pk}/rollback/", {"reason": "the summary lost the parser notes"})
    assert Compaction.objects.get(pk=compaction.pk).rolled_back
    claude.turn("try again")
    assert CONTINUED in _text(claude.sent[-1]["messages"])  # Claude Code still continues from its summary
    received = upstream_bodies(anthropic_upstream)[-1]["messages"]
    assert CONTINUED not in _text(received)  # the upstream does not: it gets the history before it ...
    assert items_of(received)[:len(before)] == before
    assert "try again" in _text(received)  # ... and what came after
    assert _wire(live(session))[:len(items_of(received))] == items_of(received)


# How Claude Code 2.1.332 records its /compact in the conversation it sends after the compaction.
COMPACT_COMMAND = ("<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n"
                   "            <command-args></command-args>")


def test_compactweb_mode_records_claude_codes_compact_command_as_manual_and_its_own_compaction_as_auto(
        anthropic_upstream):
    """compactweb answers the summary request (the same prompt for both) before anything says whose it was; the
    request after a `/compact` records the command, and the compaction is then the user's."""
    policy = CompactionPolicy.objects.create(name="claude-triggers", strategy="local")
    route = claude_route(mode="compactweb", base_url="embedded", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.compact()  # Claude Code's automatic compaction
    claude.turn("now write the docs for the loader module")
    claude.compact()  # the user's /compact: Claude Code records the command after the summary
    claude.messages.append({"role": "user", "content": [{"type": "text", "text": COMPACT_COMMAND}]})
    claude.turn("add a changelog entry for the parser fix")
    session = Session.objects.get(source="gateway")
    rows = list(Compaction.objects.filter(session=session).order_by("pk"))
    assert [(c.trigger, c.reason) for c in rows] == [("auto", "context_limit"), ("manual", "user_requested")]
    assert "/compact" in rows[1].inferred["trigger"]
