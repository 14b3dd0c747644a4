"""Issue 41: the gateway under a real Daphne process, with a real client socket and a real upstream socket.

- A client that hangs up mid-stream: the gateway notices (Daphne's `http.disconnect`), closes the upstream stream
  at once rather than reading (and paying for) the rest of an answer nobody gets, and records a client-gone
  attempt; the abandoned answer is never recorded, so the client's next request (its history without that answer)
  is an extension, not a compaction. The same for Claude Code through the Messages gateway (one stream pump).
- An upstream that dies mid-stream: the client gets a `response.failed` event, not a clean end of a truncated
  stream, and the exchange is recorded as failed.
- Two Daphne processes behind one balancer: a request recorded by one process after the next request of the same
  Codex session was recorded by the other changes nothing (no fake compaction, no rewrite)."""

from __future__ import annotations

import contextlib
import json
import socket
import time

import pytest

from compaction_app.models import Compaction, CompactionPolicy, Provider
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayAttempt, GatewayRoute, GatewaySession
from sessions_app.models import LiveItem
from tests.scale_out.gateway_upstream import EVENT_SECONDS, SLOW_EVENTS, SlowUpstream
from tests.scale_out.processes import child_env, free_port, start_daphne, stop

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

THREAD = "0190dddd-0000-7000-8000-000000000001"
BASE = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]}
KEY_ENV = "COMPACTWEB_KEY_HANG_UP_TEST"


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def request_bytes(port: int, key: str, items: list[dict], mode: str, turn: str) -> bytes:
    body = json.dumps({"model": "slow-model", "stream": True, "input": [BASE, *items]}).encode()
    meta = json.dumps({"session_id": THREAD, "thread_id": THREAD, "turn_id": turn, "request_kind": "turn"})
    head = (f"POST /gateway/v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nx-codex-turn-metadata: {meta}\r\n"
            f"x-codex-test-stream: {mode}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    got = b""
    while marker not in got:
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def read_all(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def wait_for(predicate, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.fixture
def gateway(on_postgresql, redis_url, tmp_path):
    """(Daphne's port, a route key, the upstream) with the route's upstream the slow server."""
    with _gateways(redis_url, tmp_path, 1) as (ports, key, upstream):
        yield ports[0], key, upstream


@pytest.fixture
def two_gateways(on_postgresql, redis_url, tmp_path):
    with _gateways(redis_url, tmp_path, 2) as started:
        yield started


@contextlib.contextmanager
def _gateways(redis_url, tmp_path, count: int):
    up_port, web_ports = free_port(), [free_port() for _ in range(count)]
    base_url = f"http://127.0.0.1:{up_port}/v1"
    provider = Provider.objects.create(name="slow-upstream", base_url=base_url, model="slow-model",
                                       context_window=32000, api_key_env=KEY_ENV)
    route = GatewayRoute.objects.create(name="hang-up", provider=provider,
                                        policy=CompactionPolicy.objects.create(name="hang-up"))
    key = do_create_gateway_key(route=route, client_name="laptop").key
    env = child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path)
    # (the same server is a Messages-API upstream at /anthropic: a Claude Code route's test makes its Provider)
    env.update({KEY_ENV: "upstream-secret",
                "COMPACTWEB_PROVIDER_KEYS": f"{KEY_ENV}={base_url} http://127.0.0.1:{up_port}/anthropic",
                "COMPACTWEB_OUTBOUND_ALLOW": f"127.0.0.1:{up_port}"})
    webs = []
    with SlowUpstream(port=up_port) as upstream:
        try:
            for n, port in enumerate(web_ports):
                # Daphne cancels an application 10 s after its client left; far longer here, so that what stops
                # the upstream is the gateway noticing the hang-up, not Daphne's clean-up.
                webs.append(start_daphne(port=port, env=env, log=tmp_path / f"daphne-{n}.log",
                                         options=("--application-close-timeout", "600")))
            yield web_ports, key, upstream
        finally:
            upstream.release.set()
            for web in webs:
                stop(web)
    for n in range(count):
        assert "Exception inside application" not in (tmp_path / f"daphne-{n}.log").read_text()


def test_a_client_that_hangs_up_mid_stream_stops_the_upstream_and_leaves_no_answer_in_the_record(gateway):
    port, key, upstream = gateway
    first = [user("write a long essay")]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, first, "slow", "turn-1"))
        assert b"word1 " in read_until(client, b"word1 ")  # the answer is streaming to the client
    # The client hung up. The upstream connection is closed long before its answer would have ended.
    assert upstream.wait_for(lambda: upstream.streams[0].closed_by_gateway or upstream.streams[0].finished,
                             timeout=SLOW_EVENTS * EVENT_SECONDS + 30)
    (stream,) = upstream.streams
    assert stream.closed_by_gateway and not stream.finished
    assert stream.events_sent < SLOW_EVENTS
    assert wait_for(lambda: GatewayAttempt.objects.filter(status=0).exists())
    attempt = GatewayAttempt.objects.get()
    assert "disconnected" in attempt.error and attempt.gateway_session is not None

    # The user interrupted and asks again: Codex's history never got the abandoned answer. That exchange completes.
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, [*first, user("shorter, please")], "short", "turn-2"))
        answer = read_all(client)
    assert b"response.completed" in answer
    gs = GatewaySession.objects.get()
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 2)
    history = list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
                   .values_list("item", flat=True))
    assert history[:2] == [user("write a long essay"), user("shorter, please")]  # nothing of the abandoned answer
    (answered,) = [i for i in history if i.get("role") == "assistant"]  # only the answer the client received
    assert answered is history[-1] and answered["content"][0]["text"] == "word0 word1 "
    assert not gs.session.rollout_lines.filter(kind="compacted").exists()
    assert not Compaction.objects.filter(session_id=gs.session_id).exists()


def test_a_claude_code_client_that_hangs_up_mid_stream_stops_the_upstream_and_leaves_no_answer_in_the_record(
        gateway):
    """The same through the Messages gateway (the one stream pump, proxy.relay): a real socket that closes."""
    port, _, upstream = gateway
    up_port = int(Provider.objects.get().base_url.split(":")[2].split("/")[0])
    provider = Provider.objects.create(name="slow-anthropic", base_url=f"http://127.0.0.1:{up_port}/anthropic",
                                       wire_api="anthropic", model="slow-model", context_window=200_000,
                                       api_key_env=KEY_ENV)
    route = GatewayRoute.objects.create(name="claude-hang-up", provider=provider,
                                        policy=CompactionPolicy.objects.create(name="claude-hang-up"))
    key = do_create_gateway_key(route=route, client_name="laptop").key
    ask = {"role": "user", "content": [{"type": "text", "text": "write a long essay"}]}

    def claude_request(messages: list[dict], mode: str) -> bytes:
        body = json.dumps({"model": "slow-model", "max_tokens": 1024, "stream": True, "messages": messages,
                           "metadata": {"user_id": json.dumps({"session_id": "5b9c7a1e-0000-4000-8000-00000000004e"})}})
        return (f"POST /gateway/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nx-api-key: {key}\r\n"
                f"anthropic-version: 2023-06-01\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nx-sim-test-stream: {mode}\r\nConnection: close\r\n\r\n"
                ).encode() + body.encode()

    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(claude_request([ask], "slow"))
        assert b"word1 " in read_until(client, b"word1 ")  # the answer is streaming to Claude Code
    assert upstream.wait_for(lambda: upstream.streams[0].closed_by_gateway or upstream.streams[0].finished,
                             timeout=SLOW_EVENTS * EVENT_SECONDS + 30)
    (stream,) = upstream.streams
    assert stream.messages and stream.closed_by_gateway and not stream.finished
    assert stream.events_sent < SLOW_EVENTS
    assert wait_for(lambda: GatewayAttempt.objects.filter(status=0).exists())
    attempt = GatewayAttempt.objects.get()
    assert "disconnected" in attempt.error and attempt.gateway_session is not None

    # Claude Code asks again without the abandoned answer; that exchange completes and is the only answer recorded.
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(claude_request([ask, {"role": "assistant", "content": [{"type": "text", "text": "(stopped)"}]},
                                       {"role": "user", "content": [{"type": "text", "text": "shorter"}]}], "short"))
        assert b"message_stop" in read_all(client)
    gs = GatewaySession.objects.get()
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 2)
    said = [i for i in LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
            .values_list("item", flat=True) if i.get("role") == "assistant"]
    assert len(said) == 2 and "(stopped)" in json.dumps(said[0])  # nothing of the abandoned answer
    assert "word0 word1 " in json.dumps(said[1])
    assert not gs.session.rollout_lines.filter(kind="compacted").exists()


def test_an_upstream_that_dies_mid_stream_gives_the_client_a_failed_event_not_a_clean_end(gateway):
    port, key, upstream = gateway
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, [user("hello")], "die", "turn-1"))
        answer = read_all(client)
    assert b"word2 " in answer  # what the upstream sent before it died reached the client
    assert b"event: response.failed" in answer and b"response.completed" not in answer
    assert answer.rstrip().endswith(b"0")  # the HTTP response itself ended properly (last chunk)
    assert wait_for(lambda: GatewayAttempt.objects.exists())
    attempt = GatewayAttempt.objects.get()
    assert attempt.status == 200 and "upstream stream failed" in attempt.error
    gs = GatewaySession.objects.get()
    assert not LiveItem.objects.filter(session_id=gs.session_id, item__role="assistant").exists()


def test_a_request_recorded_after_the_next_one_by_another_process_makes_no_compaction(two_gateways):
    (first_port, second_port), key, upstream = two_gateways
    asked = [user("please fix parser bug 3")]
    with socket.create_connection(("127.0.0.1", first_port), timeout=60) as held:
        held.sendall(request_bytes(first_port, key, asked, "hold", "turn-1"))
        streamed = read_until(held, b"response.output_item.done")
        (answer,) = [json.loads(line[5:])["item"] for line in streamed.decode().split("\n")
                     if line.startswith("data:") and "output_item.done" in line]
        # The client has the answer and goes on (through the other process) before the first one has ended.
        with socket.create_connection(("127.0.0.1", second_port), timeout=60) as client:
            client.sendall(request_bytes(second_port, key, [*asked, answer, user("now the docs")], "short", "turn-2"))
            assert b"response.completed" in read_all(client)
        assert wait_for(lambda: GatewaySession.objects.filter(requests=1).exists())  # the second one, recorded
        upstream.release.set()
        assert b"response.completed" in read_all(held)
    gs = GatewaySession.objects.get()
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 2)  # and then the first one
    history = list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position")
                   .values_list("item", flat=True))
    assert [i.get("content", [{}])[0].get("text") for i in history[:3]] == [
        "please fix parser bug 3", answer["content"][0]["text"], "now the docs"]
    assert not gs.session.rollout_lines.filter(kind__in=("compacted", "rollback")).exists()
    assert not Compaction.objects.filter(session_id=gs.session_id).exists()


def turn_through(port: int, key: str, items: list[dict], mode: str, turn: str) -> dict:
    """One request through the gateway on `port`, read whole; the answer's output item."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(request_bytes(port, key, items, mode, turn))
        streamed = read_all(client)
    assert b"response.completed" in streamed
    return output_item(streamed)


def output_item(streamed: bytes) -> dict:
    (item,) = [json.loads(line[5:])["item"] for line in streamed.decode().split("\n")
               if line.startswith("data:") and "output_item.done" in line]
    return item


def recorded(gs: GatewaySession) -> list[dict]:
    return list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position").values_list("item", flat=True))


def texts(items: list[dict]) -> list[str]:
    return [i["content"][0]["text"] for i in items]


def test_a_retry_through_the_other_process_is_one_exchange_whose_answer_replaces_the_first(two_gateways):
    (first_port, second_port), key, upstream = two_gateways
    asked = [user("please fix parser bug 3")]
    turn_through(first_port, key, asked, "short", "turn-1")
    assert wait_for(lambda: GatewaySession.objects.filter(requests=1).exists())
    # Codex did not get (or did not trust) the answer and sent the same request again; another process took it.
    retried = turn_through(second_port, key, asked, "other", "turn-1")
    gs = GatewaySession.objects.get()
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 2)
    assert texts(recorded(gs)) == ["please fix parser bug 3", "other0 other1 "]  # one exchange: the retry's answer
    (line,) = gs.session.rollout_lines.filter(kind="rollback")
    assert line.payload["source"] == "client_retry"
    # The session goes on from the retry's answer, through the first process: an extension.
    turn_through(first_port, key, [*asked, retried, user("now the docs")], "short", "turn-2")
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 3)
    assert texts(recorded(gs)) == ["please fix parser bug 3", "other0 other1 ", "now the docs", "word0 word1 "]
    assert gs.session.rollout_lines.filter(kind="rollback").count() == 1
    assert not gs.session.rollout_lines.filter(kind="compacted").exists()
    assert not Compaction.objects.filter(session_id=gs.session_id).exists()


def test_a_client_rewrite_through_the_other_process_is_a_rewrite_and_a_late_record_does_not_undo_one(two_gateways):
    (first_port, second_port), key, upstream = two_gateways
    u1, u2, u3 = user("please fix parser bug 3"), user("now the docs"), user("now the changelog")
    a1 = turn_through(first_port, key, [u1], "short", "turn-1")
    turn_through(second_port, key, [u1, a1, u2], "short", "turn-2")
    assert wait_for(lambda: GatewaySession.objects.filter(requests=2).exists())
    gs = GatewaySession.objects.get()
    # The user edits their last message (Codex's backtrack): the history drops u2 and its answer.
    a3 = turn_through(first_port, key, [u1, a1, u3], "short", "turn-3")
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 3)
    assert texts(recorded(gs)) == texts([u1, a1, u3, a3])  # nothing of u2 and its answer
    (line,) = gs.session.rollout_lines.filter(kind="rollback")
    assert line.payload["source"] == "client_rewrite" and line.payload["removed_count"] == 2

    u4, u5 = user("and the tests"), user("and the benchmarks")
    with socket.create_connection(("127.0.0.1", first_port), timeout=60) as held:
        # The next request streams through the first process; its record waits for the end of its stream.
        held.sendall(request_bytes(first_port, key, [u1, a1, u3, a3, u4], "hold", "turn-4"))
        read_until(held, b"response.output_item.done")
        # The user edits that message too, and the edited request goes through the other process.
        a5 = turn_through(second_port, key, [u1, a1, u3, a3, u5], "short", "turn-5")
        assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 4)
        upstream.release.set()
        assert b"response.completed" in read_all(held)
    # The replaced request's record arrives last: the client went on from the edit, so it changes nothing (it is
    # neither a rewrite back to the replaced history nor a retry).
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 5)
    assert texts(recorded(gs)) == texts([u1, a1, u3, a3, u5, a5])
    assert gs.session.rollout_lines.filter(kind="rollback").count() == 1
    assert not gs.session.rollout_lines.filter(kind="compacted").exists()
    assert not Compaction.objects.filter(session_id=gs.session_id).exists()
