"""Issue 29: what passes the gateway becomes one compactweb session per Codex session, whose live history is what
the upstream received, with compactions labelled by how they ran; in compactweb mode the route's policy compacts."""

from __future__ import annotations

import json

import pytest

from compaction_app.engine.items import SUMMARY_PREFIX
from compaction_app.models import Compaction, CompactionPolicy
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import CompactionHandle, GatewayAttempt, GatewaySession
from sessions_app.models import LiveItem, Session
from tests.gateway_app.conftest import call, make_route

pytestmark = pytest.mark.django_db(transaction=True)

THREAD = "0190bbbb-0000-7000-8000-000000000001"
BASE = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}
TRIGGER = {"type": "compaction_trigger"}


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def wire(item: dict) -> dict:
    return {k: v for k, v in item.items() if k not in ("id", "status") and v is not None}


class Codex:
    """Sends requests the way Codex 0.169 does: base instructions first, the turn metadata header, the history
    growing by the answer's output and the tool outputs."""

    def __init__(self, key: str, thread: str = THREAD, *, output_lines: int = 60) -> None:
        self.key, self.thread, self.output_lines = key, thread, output_lines
        self.history: list[dict] = []
        self.sent: list[list[dict]] = []

    def post(self, items: list[dict], *, kind: str = "turn", path: str = "/gateway/v1/responses"):
        headers = {"Authorization": f"Bearer {self.key}", "x-codex-turn-metadata": json.dumps(
            {"session_id": self.thread, "thread_id": self.thread, "turn_id": f"turn-{len(self.sent)}",
             "request_kind": kind})}
        body = {"model": "compactweb-sim", "stream": path.endswith("responses"), "input": [BASE, *items],
                "tools": [{"type": "function", "name": "exec_command", "parameters": {
                    "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]}
        self.sent.append(body["input"])
        return call("POST", path, json=body, headers=headers)

    def turn(self, text: str | None = None) -> list[dict]:
        if text is not None:
            self.history.append(user(text))
        response = self.post(self.history)
        assert response.status_code == 200, response.text
        output = [e["item"] for e in _events(response.text) if e["type"] == "response.output_item.done"]
        self.history += output
        for item in output:
            if item["type"] == "function_call":
                self.history.append({"type": "function_call_output", "call_id": item["call_id"],
                                     "output": "Process exited with code 0\nOutput:\n"
                                               + "notes line\n" * self.output_lines})
        return output

    def compact_v2(self) -> dict:
        response = self.post([*self.history, TRIGGER], kind="compaction")
        assert response.status_code == 200, response.text
        (item,) = [e["item"] for e in _events(response.text)
                   if e["type"] == "response.output_item.done" and e["item"]["type"] == "compaction"]
        # Codex keeps the real user messages and the compaction item (spec §4.3 step 8, §5.4).
        self.history = [*[i for i in self.history if i.get("role") == "user"], item]
        return item


def _events(text: str) -> list[dict]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def live(session: Session) -> list[dict]:
    return [wire(i) for i in LiveItem.objects.filter(session=session).order_by("position")
            .values_list("item", flat=True)]


def gateway_session() -> Session:
    return GatewaySession.objects.select_related("session").get().session


def test_requests_of_one_codex_session_are_one_session_whose_history_is_what_the_upstream_got(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice-laptop").key)
    codex.turn("please fix parser bug 3")
    codex.turn()
    codex.turn("now write the docs")
    session = gateway_session()
    assert session.source == "gateway" and str(session.thread_id) == THREAD
    assert session.title.startswith("alice-laptop via team-upstream-600: please fix parser bug 3")
    received = sim_upstream.requests()
    assert len(received) == 3
    # After each request was recorded the history was its input (minus the base instructions); the last answer
    # follows it.
    assert live(session)[:len(received[-1]["body"]["input"]) - 1] == [wire(i) for i in received[-1]["body"]["input"][1:]]
    assert live(session) == [wire(i) for i in codex.history[:len(live(session))]]
    assert Session.objects.count() == 1 and GatewaySession.objects.get().requests == 3


def test_two_codex_sessions_are_two_sessions(sim_upstream, route):
    key = do_create_gateway_key(route=route, client_name="bob").key
    Codex(key, "0190bbbb-0000-7000-8000-00000000000a").turn("first")
    Codex(key, "0190bbbb-0000-7000-8000-00000000000b").turn("second")
    assert Session.objects.filter(source="gateway").count() == 2


def test_without_metadata_requests_are_grouped_by_their_history_prefix(sim_upstream, route):
    from tests.gateway_app.conftest import call as raw_call

    key = do_create_gateway_key(route=route, client_name="sdk").key
    first = [BASE, user("a client without metadata")]
    raw_call("POST", "/gateway/v1/responses", json={"model": "m", "input": first},
             headers={"Authorization": f"Bearer {key}"})
    raw_call("POST", "/gateway/v1/responses", json={"model": "m", "input": [*first, user("more")]},
             headers={"Authorization": f"Bearer {key}"})
    assert Session.objects.count() == 1
    assert GatewaySession.objects.get().group_key.startswith("prefix:")


def test_an_upstream_v2_compaction_is_recorded_as_remote_v2_with_codexs_replacement(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    codex.turn("please fix parser bug 3")
    codex.turn()
    item = codex.compact_v2()
    assert not item["encrypted_content"].startswith("cwgh_")  # the upstream's own item
    codex.turn("now the docs")
    session = gateway_session()
    (compaction,) = Compaction.objects.filter(session=session)
    assert compaction.implementation == "responses_compaction_v2" and compaction.strategy == "remote_v2"
    assert "remote v2" in compaction.inferred["implementation"]
    last = sim_upstream.requests()[-1]["body"]["input"][1:]
    assert live(session)[:len(last)] == [wire(i) for i in last]


def test_compactweb_mode_compacts_with_the_policy_and_expands_its_handle_for_the_upstream(sim_upstream, db):
    masking = CompactionPolicy.objects.create(name="masking", strategy="masking", masking_keep_turns=1)
    route = make_route(mode="compactweb", policy=masking)
    # Tool outputs big enough that masking them leaves Codex room to work (test_compaction_room: when it does not).
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key, output_lines=400)
    for prompt in ("please fix parser bug 3", "now write the docs", "and check the tests"):
        codex.turn(prompt)
        codex.turn()
    before = len(sim_upstream.requests())
    item = codex.compact_v2()
    assert item["encrypted_content"].startswith("cwgh_")
    assert len(sim_upstream.requests()) == before  # compactweb answered; the upstream never saw the trigger
    session = gateway_session()
    (compaction,) = Compaction.objects.filter(session=session)
    assert (compaction.strategy, compaction.implementation) == ("masking", "observation_masking")
    handle = CompactionHandle.objects.get()
    assert handle.handle == item["encrypted_content"] and handle.compaction == compaction
    codex.turn("and the changelog")
    received = sim_upstream.requests()[-1]["body"]["input"]
    assert not any(i.get("type") == "compaction" for i in received)  # the handle was expanded ...
    masked = [i for i in received if i.get("type") == "function_call_output"
              and i["output"].startswith("[output masked by compactweb")]
    assert masked  # ... into the masked history
    assert live(session)[:len(received) - 1] == [wire(i) for i in received[1:]]


def test_an_unknown_handle_is_refused_and_never_forwarded(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="x").key)
    codex.history = [user("hi"), {"type": "compaction", "encrypted_content": "cwgh_forged"}]
    response = codex.post(codex.history)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_compaction_handle"
    # What Codex shows its user: which item, and what to do about it.
    assert response.json()["error"]["message"] == (
        "the compaction item's encrypted_content cwgh_forged… is not a handle this gateway issued in this Codex "
        "session with this key (or it was removed); start a new Codex session or compact again")
    assert sim_upstream.requests() == []
    assert GatewayAttempt.objects.get().status == 400


def test_a_compaction_the_policy_cannot_run_fails_like_an_upstream_and_leaves_history(sim_upstream, db):
    masking = CompactionPolicy.objects.create(name="masking-none", strategy="masking")
    route = make_route(mode="compactweb", policy=masking)
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key)
    codex.turn("hello")  # no tool output at all: nothing to mask
    session = gateway_session()
    response = codex.post([*codex.history, TRIGGER], kind="compaction")
    assert response.status_code == 500 and response.json()["error"]["code"] == "compaction_failed"
    # The history is the compaction request's (its tool output recorded), with no partial replacement.
    assert live(session) == [wire(i) for i in codex.history]
    assert not session.rollout_lines.filter(kind="compacted").exists()
    assert not Compaction.objects.filter(session=session).exists()
    assert GatewayAttempt.objects.filter(status=500).exists()


def test_compactweb_modes_own_failure_answers_codex_a_fixed_message_and_keeps_the_exceptions_text_for_operators(
        sim_upstream, db, caplog):
    """The policy's fallback summary cannot reach its model (the route's Provider is not reachable from compactweb
    itself): Codex gets the 500 `compaction_failed` it retries, with the gateway's fixed message; the failure's
    text (a host name, a model's answer, a query) is the operator's: in the exchange's attempt and the log, never
    in the answer (issue 41/42: no server paths or secrets in messages)."""
    import logging

    from gateway_app import proxy
    masking = CompactionPolicy.objects.create(name="masking-unreachable", strategy="masking")
    route = make_route(mode="compactweb", policy=masking)
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key)
    codex.turn("hello")  # nothing to mask: the fallback summarises with the route's model, which is not reachable
    logger = logging.getLogger("gateway_app.proxy")  # (the project's logging config does not propagate it)
    logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="gateway_app.proxy"):
            response = codex.post([*codex.history, TRIGGER], kind="compaction")
    finally:
        logger.removeHandler(caplog.handler)
    assert response.status_code == 500, response.text
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("compaction_failed", proxy.INTERNAL_COMPACTION_FAILURE)
    assert "ConnectError" not in response.text and "Name or service" not in response.text
    attempt = GatewayAttempt.objects.get(status=500)
    assert "ConnectError" in attempt.error, attempt.error  # what failed, for the operator
    assert "ConnectError" in caplog.text


def test_an_item_codex_sends_back_with_null_fields_and_its_metadata_still_extends_the_history(sim_upstream, route):
    codex = Codex(do_create_gateway_key(route=route, client_name="alice").key)
    output = codex.turn("please fix parser bug 3")
    assert output[0]["type"] == "reasoning"
    # Codex echoes a reasoning item with "content": null and its own metadata.
    codex.history = [{**i, "content": None, "internal_chat_message_metadata_passthrough": {"turn_id": "t"}}
                     if i["type"] == "reasoning" else i for i in codex.history]
    codex.turn()
    assert not Compaction.objects.exists()
    assert not gateway_session().rollout_lines.filter(kind="compacted").exists()


def _local_summary_route():
    from compaction_app.models import Provider
    from gateway_app.models import GatewayRoute

    # The policy's local summarisation calls the route's upstream model: here the embedded simulated model.
    provider = Provider.objects.create(name="embedded-upstream", base_url="embedded", model="compactweb-sim",
                                       context_window=32000)
    policy = CompactionPolicy.objects.create(name="local-summary", strategy="local")
    return GatewayRoute.objects.create(name="team-local", provider=provider, policy=policy, compaction_mode="compactweb")


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_compactweb_mode_with_local_summarisation_answers_in_the_endpoints_own_shape(sim_upstream, db, version):
    codex = Codex(do_create_gateway_key(route=_local_summary_route(), client_name="ci").key)
    codex.turn("please fix parser bug 3")
    codex.turn()
    codex.turn("now write the docs")
    before = len(sim_upstream.requests())
    if version == "v2":
        response = codex.post([*codex.history, TRIGGER], kind="compaction")
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _events(response.text)
        assert [e["type"] for e in events] == ["response.created", "response.output_item.added",
                                               "response.output_item.done", "response.completed"]
        (item,) = events[-1]["response"]["output"]
        assert events[-1]["response"]["usage"]["input_tokens"] > 0
    else:
        response = codex.post(codex.history, path="/gateway/v1/responses/compact")
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert body["object"] == "response.compaction" and body["usage"]["input_tokens"] > 0
        (item,) = body["output"]
    assert response.status_code == 200
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("cwgh_")
    assert len(sim_upstream.requests()) == before  # compactweb answered; the upstream saw no compaction request
    (compaction,) = Compaction.objects.filter(session=gateway_session())
    assert compaction.strategy == "local"
    handle = CompactionHandle.objects.get(handle=item["encrypted_content"])
    summaries = [i for i in handle.replacement if i.get("role") == "user"
                 and i["content"][0]["text"].startswith(SUMMARY_PREFIX)]
    assert len(summaries) == 1  # the replacement holds the summary the upstream model wrote
    codex.history = [*[i for i in codex.history if i.get("role") == "user"], item]
    codex.turn("and the changelog")
    received = sim_upstream.requests()[-1]["body"]["input"]
    assert [wire(i) for i in received[1:-1]] == [wire(i) for i in handle.replacement]


def test_compactweb_masking_with_nothing_to_mask_falls_back_to_local_summarisation(sim_upstream, db):
    from compaction_app.models import Provider
    from gateway_app.models import GatewayRoute

    provider = Provider.objects.create(name="embedded-upstream-m", base_url="embedded", model="compactweb-sim",
                                       context_window=32000)
    masking = CompactionPolicy.objects.create(name="masking-nothing", strategy="masking")
    route = GatewayRoute.objects.create(name="team-masking", provider=provider, policy=masking,
                                        compaction_mode="compactweb")
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key)
    codex.turn("hello")  # no tool output at all: nothing to mask
    response = codex.post([*codex.history, TRIGGER], kind="compaction")
    assert response.status_code == 200, response.text
    (item,) = [e["item"] for e in _events(response.text) if e["type"] == "response.output_item.done"]
    assert item["encrypted_content"].startswith("cwgh_")
    (compaction,) = Compaction.objects.filter(session=gateway_session())
    assert compaction.strategy == "local"  # what ran instead of the policy's masking
    codex.history = [*[i for i in codex.history if i.get("role") == "user"], item]
    codex.turn("and go on")  # the session lives on


def test_a_compaction_the_policy_can_never_run_is_a_400_codex_shows_not_a_500_it_retries(sim_upstream, db):
    # A remote strategy on a provider without remote compaction: refused before anything runs, every time.
    remote = CompactionPolicy.objects.create(name="remote-v1-only", strategy="remote_v1")
    route = make_route(mode="compactweb", policy=remote)
    codex = Codex(do_create_gateway_key(route=route, client_name="ci").key)
    codex.turn("hello")
    response = codex.post([*codex.history, TRIGGER], kind="compaction")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "compaction_refused" and error["message"].startswith("compactweb gateway: route ")
    assert GatewayAttempt.objects.filter(status=400).exists()
    assert not Compaction.objects.exists()
