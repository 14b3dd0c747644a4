"""Issue 44: the Anthropic Messages gateway. Claude Code's requests (here a client that sends what Claude Code
2.1.332 sends: its system prompt, the whole conversation, a Bash tool, `metadata.user_id` with its session id, and
its summary request to compact) pass through `/gateway/anthropic/v1/messages` to an upstream that speaks the
Messages API (the simulated model's), with the route's keys, limits, pause and isolation, and are recorded as one
compactweb session per Claude Code session, whose history is what the upstream received."""

from __future__ import annotations

import json
import uuid

import pytest

from compaction_app.engine.items import message_text
from compaction_app.engine.pins import is_pinned_block
from compaction_app.models import Compaction, CompactionPolicy, Provider
from compaction_app.providers.anthropic_format import content_items
from gateway_app import anthropic_wire, limits, proxy
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayAttempt, GatewayRoute, GatewaySession
from sessions_app.models import RolloutLine, Session
from tests.gateway_app.conftest import ANTHROPIC_UPSTREAM, UPSTREAM_KEY, call
from tests.gateway_app.test_recording import live

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}]
BASH = {"name": "Bash", "description": "Run a shell command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
SUMMARY_PROMPT = ("Your task is to create a detailed summary of the conversation so far, paying close attention to "
                  "the user's explicit requests and your previous actions.")
CONTINUED = "This session is being continued from a previous conversation that ran out of context. Summary:\n"


def claude_route(*, mode: str = "upstream", rpm: int = 600, max_body: int = 8 * 1024 * 1024, name: str = "claude",
                 base_url: str = ANTHROPIC_UPSTREAM, policy=None) -> GatewayRoute:
    provider = Provider.objects.create(name=f"anthropic-{name}", base_url=base_url, wire_api="anthropic",
                                       model="claude-sonnet-4-5", context_window=200_000,
                                       api_key_env="" if base_url == "embedded" else "COMPACTWEB_KEY_GATEWAY_TEST")
    policy = policy or CompactionPolicy.objects.create(name=f"claude-policy-{name}")
    return GatewayRoute.objects.create(name=name, provider=provider, policy=policy, compaction_mode=mode,
                                       requests_per_minute=rpm, max_body_bytes=max_body)


def events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def blocks_of_stream(text: str) -> tuple[list[dict], dict]:
    """The content blocks and usage of a streamed Messages answer, as Claude Code assembles them."""
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    usage: dict = {}
    for event in events(text):
        if event["type"] == "message_start":
            usage.update(event["message"]["usage"])
        elif event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                blocks[event["index"]]["text"] += delta["text"]
            else:
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif event["type"] == "message_delta":
            usage.update(event["usage"])
    for index, text_ in partial.items():
        blocks[index]["input"] = json.loads(text_)
    return [blocks[i] for i in sorted(blocks)], usage


class Claude:
    """What Claude Code sends: the whole conversation each time, tool results back, its summary request."""

    def __init__(self, key: str, *, session_id: str | None = None, path: str = "/gateway/anthropic/v1/messages",
                 header: str = "x-api-key", stream: bool = True) -> None:
        self.key, self.path, self.header, self.stream = key, path, header, stream
        self.session_id = session_id or str(uuid.uuid4())
        self.messages: list[dict] = []
        self.sent: list[dict] = []
        self.usages: list[dict] = []

    def headers(self) -> dict[str, str]:
        value = self.key if self.header == "x-api-key" else f"Bearer {self.key}"
        return {self.header: value, "anthropic-version": "2023-06-01", "x-app": "cli"}

    def body(self, messages: list[dict]) -> dict:
        return {"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": self.stream, "system": SYSTEM,
                "tools": [BASH], "messages": messages,
                "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "account_uuid": "",
                                                    "session_id": self.session_id})}}

    def post(self, messages: list[dict]):
        body = json.loads(json.dumps(self.body(messages)))  # as sent, whatever the conversation becomes
        self.sent.append(body)
        return call("POST", self.path, json=body, headers=self.headers())

    def ask(self, messages: list[dict]) -> list[dict]:
        response = self.post(messages)
        assert response.status_code == 200, response.text
        if self.stream:
            blocks, usage = blocks_of_stream(response.text)
        else:
            blocks, usage = response.json()["content"], response.json()["usage"]
        self.usages.append(usage)
        return blocks

    def turn(self, text: str) -> None:
        """One prompt: the model's answers and tool results until it ends its turn (tools run as Claude Code's)."""
        self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        for _ in range(6):
            blocks = self.ask(self.messages)
            self.messages.append({"role": "assistant", "content": blocks})
            calls = [b for b in blocks if b["type"] == "tool_use"]
            if not calls:
                return
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": f"ran {c['input']}"} for c in calls]})

    def compact(self, *, times: int = 1, keep: int = 0) -> str:
        """Claude Code's compaction: the summary request (sent `times` times), then the conversation restarts
        from the summary, in Claude Code's framing. With `keep`, the newest `keep` messages are left out of the
        summary request and kept verbatim after the summary, as Claude Code 2.x does."""
        summarised, kept = (self.messages[:-keep], self.messages[-keep:]) if keep else (self.messages, [])
        for _ in range(times):
            blocks = self.ask([*summarised, {"role": "user", "content": [{"type": "text", "text": SUMMARY_PROMPT}]}])
        summary = "".join(b.get("text", "") for b in blocks)
        self.messages = [{"role": "user", "content": [{"type": "text", "text": CONTINUED + summary}]}, *kept]
        return summary


def items_of(messages: list[dict]) -> list[dict]:
    return [i for m in messages for i in content_items(m["role"], m["content"])]


def upstream_bodies(up) -> list[dict]:
    return [r["body"] for r in up.requests() if r["endpoint"] == "/anthropic/v1/messages"]


def test_claude_codes_turns_pass_through_with_the_upstreams_key_and_are_recorded_as_what_the_upstream_received(
        anthropic_upstream):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice-laptop").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.turn("now write the docs for the loader module")
    bodies = upstream_bodies(anthropic_upstream)
    assert bodies == claude.sent  # the bodies pass unchanged
    headers = [h for h in anthropic_upstream.seen_headers if "x-api-key" in h]
    assert {h["x-api-key"] for h in headers} == {UPSTREAM_KEY}  # the Provider's key, never the client's
    assert all(h["anthropic-version"] == "2023-06-01" and "authorization" not in h for h in headers)

    gs = GatewaySession.objects.get()
    session = gs.session
    assert str(session.thread_id) == claude.session_id and session.source == "gateway"
    assert session.base_instructions == SYSTEM[0]["text"]
    assert gs.requests == len(claude.sent)
    # The recorded history is the conversation the upstream received, then its last answer.
    assert [anthropic_wire.wire.wire_form(i) for i in live(session)] == items_of(claude.messages)
    kinds = {i["type"] for i in live(session)}
    assert {"function_call", "function_call_output", "message"} <= kinds  # the Bash tool ran
    usage = RolloutLine.objects.filter(session=session, kind="event_msg", payload__type="token_count")
    assert usage.count() == len(claude.sent)
    last = usage.order_by("-seq").first().payload["info"]["last_token_usage"]
    assert last["input_tokens"] == (claude.usages[-1]["input_tokens"] + claude.usages[-1]["cache_read_input_tokens"]
                                    + claude.usages[-1]["cache_creation_input_tokens"])


def test_json_answers_and_count_tokens_pass_through_and_the_bearer_form_of_the_key_works(anthropic_upstream):
    route = claude_route()
    key = do_create_gateway_key(route=route, client_name="ci").key
    claude = Claude(key, stream=False, header="authorization", path="/gateway/r/claude/anthropic/v1/messages")
    claude.turn("check the tests for the parser and report")
    assert GatewaySession.objects.get().requests == len(claude.sent)
    counted = call("POST", "/gateway/anthropic/v1/messages/count_tokens", headers={"x-api-key": key},
                   json={"model": "claude-sonnet-4-5", "messages": claude.messages, "system": SYSTEM})
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert GatewaySession.objects.get().requests == len(claude.sent)  # counting is not an exchange


def test_refusals_come_in_anthropics_error_shape_and_nothing_is_forwarded(anthropic_upstream, monkeypatch):
    # One minute's window throughout, whenever the test runs: crossing a minute between requests reset the count
    # and the last request was let through (200, not 429) on a loaded machine.
    monkeypatch.setattr(limits, "window_now", lambda: 1)
    route = claude_route(rpm=3, max_body=20_000)
    key = do_create_gateway_key(route=route, client_name="alice").key
    body = Claude(key).body([{"role": "user", "content": "hi"}])
    for headers in ({}, {"x-api-key": "cwg_not-a-key"}, {"x-api-key": UPSTREAM_KEY}):
        refused = call("POST", "/gateway/anthropic/v1/messages", json=body, headers=headers)
        assert refused.status_code == 401
        assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "authentication_error"
    big = call("POST", "/gateway/anthropic/v1/messages", headers={"x-api-key": key},
               json={**body, "messages": [{"role": "user", "content": "x" * 30_000}]})
    assert (big.status_code, big.json()["error"]["type"]) == (413, "request_too_large")
    for bad in (b"[1]", b'{"messages": "hi"}', b'{"messages": [{"role": "system", "content": "x"}]}',
                b'{"messages": [{"role": "user", "content": "\\ud800"}]}'):
        refused = call("POST", "/gateway/anthropic/v1/messages", content=bad, headers={"x-api-key": key})
        assert (refused.status_code, refused.json()["error"]["type"]) == (429, "rate_limit_error") or \
            (refused.status_code, refused.json()["error"]["type"]) == (400, "invalid_request_error"), refused.text
    limited = call("POST", "/gateway/anthropic/v1/messages", json=body, headers={"x-api-key": key})
    assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limit_error"
    assert "retry-after" in limited.headers
    assert upstream_bodies(anthropic_upstream) == []


def test_a_route_whose_upstream_is_not_anthropic_refuses_claude_code(anthropic_upstream):
    from tests.gateway_app.conftest import make_route
    key = do_create_gateway_key(route=make_route(), client_name="alice").key
    refused = Claude(key).post([{"role": "user", "content": "hi"}])
    assert refused.status_code == 404 and "Messages API" in refused.json()["error"]["message"]
    assert anthropic_upstream.requests() == []


def test_the_same_claude_session_with_another_key_is_a_session_of_its_own(anthropic_upstream):
    route = claude_route()
    alice = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    mallory = Claude(do_create_gateway_key(route=route, client_name="mallory").key, session_id=alice.session_id)
    alice.turn("please fix parser bug number 3")
    mallory.turn("rewrite everything")
    assert GatewaySession.objects.count() == 2
    sessions = {gs.client_name: gs.session for gs in GatewaySession.objects.select_related("session")}
    assert "rewrite everything" not in json.dumps(live(sessions["alice"]))
    assert str(sessions["alice"].thread_id) == alice.session_id != str(sessions["mallory"].thread_id)


def test_a_paused_claude_session_is_refused_with_the_operators_message(anthropic_upstream, client, operator_user):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3")
    session = Session.objects.get(source="gateway")
    client.force_login(operator_user)
    assert client.post(f"/gateway-sessions/{session.pk}/pause/").status_code == 302
    before = len(anthropic_upstream.requests())
    claude.messages.append({"role": "user", "content": [{"type": "text", "text": "go on"}]})
    refused = claude.post(claude.messages)
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "permission_error" and "paused" in refused.json()["error"]["message"]
    assert len(anthropic_upstream.requests()) == before
    client.post(f"/gateway-sessions/{session.pk}/resume/")
    claude.messages.pop()
    claude.turn("go on")
    assert len(anthropic_upstream.requests()) > before


def test_upstream_mode_records_claude_codes_compaction_with_its_summary_requests_as_call_tokens(anthropic_upstream):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.turn("now write the docs for the loader module")
    summary = claude.compact(times=2)  # Claude Code may send its summary request twice
    calls = claude.usages[-2:]
    claude.turn("add a changelog entry for the parser fix")
    session = Session.objects.get(source="gateway")
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.strategy == "local" and compaction.trigger == "auto"
    assert "Claude Code's summary request" in compaction.inferred["implementation"]
    assert summary and summary in compaction.summary
    # The call tokens are the two summary requests' usage, exactly.
    assert compaction.call_tokens == sum(u["input_tokens"] + u["cache_read_input_tokens"]
                                         + u["cache_creation_input_tokens"] + u["output_tokens"] for u in calls)
    # The history after it is what Claude Code sent next, and it grows from there by extension.
    assert [anthropic_wire.wire.wire_form(i) for i in live(session)] == items_of(claude.messages)
    assert not RolloutLine.objects.filter(session=session, kind="rollback").exists()
    assert upstream_bodies(anthropic_upstream) == claude.sent


def test_a_summary_request_that_leaves_out_the_newest_messages_is_a_compaction_not_a_retry(anthropic_upstream):
    """Claude Code summarises up to some point and keeps its newest messages verbatim after the summary: its
    summary request is a prefix of the recorded history. That is the compaction's request, not a retry of an
    older turn: nothing recorded is undone, and its next request installs the compaction."""
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    claude.turn("now write the docs for the loader module")
    claude.compact(times=2, keep=2)  # the newest user message and its answer stay verbatim
    claude.turn("add a changelog entry for the parser fix")
    session = Session.objects.get(source="gateway")
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.strategy == "local" and compaction.trigger == "auto"
    assert not RolloutLine.objects.filter(session=session, kind="rollback").exists()
    assert [anthropic_wire.wire.wire_form(i) for i in live(session)] == items_of(claude.messages)


def test_an_upstream_error_passes_through_and_is_an_attempt_not_history(anthropic_upstream):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    response = call("POST", "/gateway/anthropic/v1/messages", json={**claude.body([{"role": "user", "content": "hi"}]),
                                                                    "model": "claude-sonnet-4-5"},
                    headers={**claude.headers(), "x-sim-fault": "overloaded"})
    assert response.status_code == 429
    (attempt,) = GatewayAttempt.objects.all()
    assert attempt.status == 429 and attempt.endpoint == anthropic_wire.MESSAGES
    assert not RolloutLine.objects.filter(kind="response_item").exists()
    assert response.headers["retry-after"] == "1"


def test_a_stream_the_upstream_cut_ends_with_an_error_event_and_is_not_history(anthropic_upstream):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    response = call("POST", "/gateway/anthropic/v1/messages", json=claude.body([{"role": "user", "content": "hi"}]),
                    headers={**claude.headers(), "x-sim-fault": "stream_closed"})
    assert response.status_code == 200
    last = events(response.text)[-1]
    assert last["type"] == "error" and last["error"]["message"].startswith("compactweb gateway:")
    (attempt,) = GatewayAttempt.objects.all()
    assert "message_stop" in attempt.error
    assert not RolloutLine.objects.filter(kind="response_item").exists()


def test_compactweb_mode_answers_claude_codes_summary_request_with_the_policys_summary_and_pins(client,
                                                                                               support_user):
    policy = CompactionPolicy.objects.create(name="claude-compactweb", strategy="local",
                                             compact_prompt="Summarise for the team: keep file names.")
    route = claude_route(mode="compactweb", base_url="embedded", policy=policy)
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    session = Session.objects.get(source="gateway")
    client.force_login(support_user)
    client.post(f"/sessions/{session.pk}/pins/", {"kind": "constraint", "text": "never touch prod.yaml"})
    claude.turn("now write the docs for the loader module")
    summary = claude.compact()
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.policy_id == policy.pk and compaction.strategy == "local"
    assert compaction.summary and compaction.summary in summary  # the policy's summary is what Claude Code got
    assert summary.startswith("<summary>") and "Handoff summary" in summary  # a summary, as Claude Code asks
    # The pin is kept by the gateway, which puts the block in every later request (below), not in the summary: there
    # it would reach the upstream a second time.
    assert "never touch prod.yaml" not in summary
    claude.turn("add a changelog entry for the parser fix")
    # Claude Code's next conversation starts from the policy's summary; the record installs it (no second
    # compaction) and grows by extension from there.
    assert Compaction.objects.filter(session=session).count() == 1
    sources = [r.payload["source"] for r in RolloutLine.objects.filter(session=session, kind="rollback")]
    assert sources == ["claude_code_summary"], sources
    history = live(session)
    assert [i for i in history if not is_pinned_block(i)] == items_of(claude.messages)
    # Claude Code's compacted conversation does not reach where the block stood in the recorded history, so the
    # block in force goes right after the base instructions (steering.with_pins), then the summary; whether the
    # next turn came within the control cache's seconds or not (a control cached before the compaction put the
    # block by the old history's positions instead: the order then hung on the machine's speed).
    assert is_pinned_block(history[0]) and "never touch prod.yaml" in json.dumps(history[0])
    assert summary in message_text(history[1])


def test_a_pin_reaches_the_upstream_in_every_later_request_and_the_record_grows_by_extension(
        anthropic_upstream, client, support_user):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3 in the notes")
    session = Session.objects.get(source="gateway")
    client.force_login(support_user)
    client.post(f"/sessions/{session.pk}/pins/", {"kind": "constraint", "text": "never touch prod.yaml"})
    for text in ("go on", "and the docs"):
        claude.turn(text)
        received = upstream_bodies(anthropic_upstream)[-1]
        assert "never touch prod.yaml" in json.dumps(received["messages"])  # the upstream sees the pin ...
        assert "never touch prod.yaml" not in json.dumps(claude.sent[-1])  # ... Claude Code itself never had it
    assert not RolloutLine.objects.filter(session=session, kind="rollback").exists()
    forwarded = upstream_bodies(anthropic_upstream)[-1]["messages"]
    assert live(session)[:-1] == [anthropic_wire.wire.wire_form(i) for i in
                                  anthropic_wire.items_of({"messages": forwarded})][:len(live(session)) - 1]
    proxy.close_recorder_connections()


def test_claude_codes_requests_are_on_metrics_with_their_endpoints_and_a_cut_stream_is_an_upstream_error(
        anthropic_upstream, client, settings):
    from tests.gateway_app.test_gateway_metrics import Grew
    from tests.metrics_reading import TOKEN
    settings.COMPACTWEB_METRICS_TOKEN = TOKEN
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    grew = Grew(client)
    claude.turn("please fix parser bug number 3")
    call("POST", "/gateway/anthropic/v1/messages/count_tokens", headers=claude.headers(),
         json={"model": "claude-sonnet-4-5", "messages": claude.messages})
    call("POST", "/gateway/anthropic/v1/messages", json=claude.body([{"role": "user", "content": "hi"}]),
         headers={**claude.headers(), "x-sim-fault": "stream_closed"})
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="anthropic/messages",
                mode="upstream", status="200") == len(claude.sent) + 1
    assert grew("compactweb_gateway_requests_total", route=route.name, endpoint="anthropic/count_tokens",
                mode="upstream", status="200") == 1
    assert grew("compactweb_gateway_upstream_errors_total", route=route.name, reason="stream_failed") == 1


def test_a_passing_route_sends_claude_codes_own_key_upstream_and_keeps_it_nowhere(anthropic_upstream, caplog):
    import io
    import logging

    from django.core.management import call_command
    own = "sk-ant-own-key-of-alice-5c1d"
    route = claude_route()
    route.pass_client_bearer = True
    route.save()
    key = do_create_gateway_key(route=route, client_name="alice").key
    caplog.set_level(logging.DEBUG)
    claude = Claude(own)  # ANTHROPIC_API_KEY is the user's own; the gateway key goes in its own header
    body = claude.body([{"role": "user", "content": "hi"}])
    response = call("POST", "/gateway/anthropic/v1/messages", json=body,
                    headers={**claude.headers(), "x-compactweb-gateway-key": key})
    assert response.status_code == 200
    seen = anthropic_upstream.seen_headers[-1]
    assert seen["x-api-key"] == own and "x-compactweb-gateway-key" not in seen
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert own not in dump.getvalue() and own not in caplog.text
    # On a route that does not pass it, the client's own key is dropped: the Provider's goes upstream.
    route.pass_client_bearer = False
    route.save()
    proxy._keys.clear()
    call("POST", "/gateway/anthropic/v1/messages", json=body,
         headers={**claude.headers(), "x-compactweb-gateway-key": key})
    assert anthropic_upstream.seen_headers[-1]["x-api-key"] == UPSTREAM_KEY


def test_a_users_own_key_works_only_under_a_route_that_takes_user_keys(anthropic_upstream, operator_user):
    from gateway_app.keys import do_create_user_gateway_key
    route = claude_route()
    key = do_create_user_gateway_key(user=operator_user, name="laptop").key
    named = f"/gateway/r/{route.name}/anthropic/v1/messages"
    body = Claude(key).body([{"role": "user", "content": "hi"}])
    assert call("POST", named, json=body, headers={"x-api-key": key}).status_code == 401  # not allowed yet
    route.allow_user_keys = True
    route.save()
    proxy._keys.clear()
    assert call("POST", "/gateway/anthropic/v1/messages", json=body, headers={"x-api-key": key}).status_code == 401
    assert call("POST", named, json=body, headers={"x-api-key": key}).status_code == 200
    assert GatewaySession.objects.get().client_name == f"{operator_user.get_username()} (laptop)"


def test_a_claude_session_compacting_in_a_burst_through_the_gateway_raises_a_storm(anthropic_upstream,
                                                                                  operator_api):
    route = claude_route()
    claude = Claude(do_create_gateway_key(route=route, client_name="alice").key)
    claude.turn("please fix parser bug number 3")
    raised = []
    for n in range(4):  # four compactions in a minute: more than the default three in ten minutes
        claude.compact()
        claude.turn(f"go on with step {n}")
        raised.append([a["kind"] for a in operator_api.get("/api/v1/alerts").json()])
    assert raised[:3] == [[], [], []]
    assert "storm" in raised[3]
    (storm,) = [a for a in operator_api.get("/api/v1/alerts").json() if a["kind"] == "storm"]
    assert len(storm["compactions"]) == 4
    assert not Compaction.objects.filter(history=True).exists()  # live, not imported history
