"""Issue 41, "no record lost", against real Daphne processes, a real client socket and a real upstream socket:

- A gateway process SIGKILLed mid-stream: the exchange it was streaming had been noted as begun, so once a gateway
  process starts again (or the scheduler's housekeeping runs) it is recorded as cut, on its session, with nothing
  of its answer; the session's next request is recorded as usual.
- A gateway process SIGKILLed after the client got its answer's end and before the recorder wrote the exchange (the
  database holds the recorder back): the exchange's record was durable before that end went (durable-first
  recording), so the next gateway process writes it whole, for a Codex (Responses) and a Claude Code (Messages)
  exchange alike, the first request of its session too: nothing the client received is lost.
- A gateway process stopped (SIGTERM) with records still queued (the database holds the recorder back) and a stream
  in flight: it exits within a bound, every answered exchange's record is written first, and the stream the stop
  cut is recorded as cut."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
import time

import psycopg
import pytest

from compaction_app.models import CompactionPolicy, Provider
from gateway_app.keys import do_create_gateway_key
from gateway_app.models import GatewayAttempt, GatewayInFlight, GatewayRoute, GatewaySession
from sessions_app.models import LiveItem
from tests.scale_out.gateway_upstream import SlowUpstream
from tests.scale_out.processes import child_env, database_env, free_port, start_daphne, stop
from tests.scale_out.test_gateway_on_daphne import BASE, KEY_ENV, THREAD, read_all, read_until, user, wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

STOP_BOUND_SECONDS = 30.0  # the recorder's drain gets 30 s at exit; a stop must end within that and a margin


@pytest.fixture
def setting(on_postgresql, redis_url, tmp_path):
    """(start a gateway Daphne: port -> process, a route key, the upstream)."""
    up_port = free_port()
    base_url = f"http://127.0.0.1:{up_port}/v1"
    provider = Provider.objects.create(name="slow-upstream", base_url=base_url, model="slow-model",
                                       context_window=32000, api_key_env=KEY_ENV)
    route = GatewayRoute.objects.create(name="records", provider=provider,
                                        policy=CompactionPolicy.objects.create(name="records"))
    key = do_create_gateway_key(route=route, client_name="laptop").key
    env = child_env(redis_url=redis_url, broker_url=redis_url, var_dir=tmp_path)
    env.update({KEY_ENV: "upstream-secret", "COMPACTWEB_PROVIDER_KEYS": f"{KEY_ENV}={base_url}",
                "COMPACTWEB_OUTBOUND_ALLOW": f"127.0.0.1:{up_port}"})
    started = []

    def start(port: int):
        web = start_daphne(port=port, env=env, log=tmp_path / f"daphne-{len(started)}.log")
        started.append(web)
        return web

    with SlowUpstream(port=up_port) as upstream:
        try:
            yield start, key, upstream
        finally:
            upstream.release.set()
            for web in started:
                stop(web, sig=signal.SIGKILL)


def request_bytes(port: int, key: str, items: list[dict], mode: str, turn: str, *, thread: str = THREAD) -> bytes:
    body = json.dumps({"model": "slow-model", "stream": True, "input": [BASE, *items]}).encode()
    meta = json.dumps({"session_id": thread, "thread_id": thread, "turn_id": turn, "request_kind": "turn"})
    head = (f"POST /gateway/v1/responses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nx-codex-turn-metadata: {meta}\r\n"
            f"x-codex-test-stream: {mode}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def history_of(gs: GatewaySession) -> list[dict]:
    return list(LiveItem.objects.filter(session_id=gs.session_id).order_by("position").values_list("item", flat=True))


def assistant_texts(history: list[dict]) -> list[str]:
    return [i["content"][0]["text"] for i in history if i.get("role") == "assistant"]


def test_a_gateway_killed_mid_stream_leaves_the_exchange_recorded_as_cut_and_nothing_invented(setting, client,
                                                                                              operator_user):
    start, key, upstream = setting
    port = free_port()
    web = start(port)
    asked = [user("fix parser bug 3")]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(request_bytes(port, key, asked, "short", "turn-1"))
        assert b"response.completed" in read_all(c)
    assert wait_for(lambda: GatewaySession.objects.filter(requests=1).exists())
    gs = GatewaySession.objects.get()
    recorded = history_of(gs)

    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(request_bytes(port, key, [*recorded, user("now write the docs, at length")], "slow", "turn-2"))
        assert b"word1 " in read_until(c, b"word1 ")  # streaming to the client
        assert GatewayInFlight.objects.filter(endpoint="responses").count() == 1  # noted as begun, durably
        web.send_signal(signal.SIGKILL)
        web.wait(timeout=30)
        with contextlib.suppress(OSError):
            read_all(c)  # the connection drops with the process
    time.sleep(1)
    assert not GatewayAttempt.objects.exists() and GatewayInFlight.objects.count() == 1  # nothing ran at the kill

    # A gateway process starts again (a supervisor would); the client goes on without the cut answer.
    port = free_port()
    start(port)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(request_bytes(port, key, [*recorded, user("just the docs, briefly")], "short", "turn-3"))
        assert b"response.completed" in read_all(c)
    assert wait_for(lambda: GatewaySession.objects.get(pk=gs.pk).requests == 3)
    (cut,) = GatewayAttempt.objects.all()
    assert cut.cut and cut.status == 0 and cut.gateway_session_id == gs.pk and "its process is gone" in cut.error
    assert not GatewayInFlight.objects.exists()
    history = history_of(gs)
    # Nothing of the cut request or its answer: the history is the next request's and its answer.
    assert history[:len(recorded)] == recorded and history[len(recorded)] == user("just the docs, briefly")
    assert len(history) == len(recorded) + 2 and history[-1]["role"] == "assistant"
    assert not gs.session.rollout_lines.filter(kind__in=("compacted", "rollback")).exists()

    client.force_login(operator_user)
    page = client.get(f"/sessions/{gs.session_id}/").content.decode()
    assert 'id="gateway-cut"' in page and "1 exchange cut" in page


@contextlib.contextmanager
def recorder_held_back():
    """The gateway's recorder stopped at its first record by a lock on the gateway sessions' table (another
    connection, as a slow or busy database would), until the block ends."""
    dsn = database_env()["DATABASE_URL"]
    with psycopg.connect(dsn, autocommit=False) as held:
        held.execute("LOCK TABLE gateway_app_gatewaysession IN EXCLUSIVE MODE")  # plain reads still go
        yield held
        held.rollback()


def row_unlocked() -> bool:
    """Whether the journal's rows can be locked: a killed process's backend, waiting on the table lock when the
    kill came, has ended its transaction (it notices the client gone only once its statement runs)."""
    with psycopg.connect(database_env()["DATABASE_URL"], autocommit=False) as probe:
        try:
            probe.execute("SELECT token FROM gateway_app_gatewayinflight FOR UPDATE NOWAIT").fetchall()
            return True
        except psycopg.errors.LockNotAvailable:
            return False


def killed_after_the_end(start, ask) -> bytes:
    """Start a gateway process, let `ask(port)` get an answer whole while the recorder is held back, SIGKILL the
    process (the record still queued), then let the database go; the answer the client got."""
    port = free_port()
    web = start(port)
    with recorder_held_back():
        answer = ask(port)
        (row,) = GatewayInFlight.objects.all()
        assert row.ended  # the whole record was committed before the answer's end reached the client
        assert not GatewaySession.objects.exists() and not GatewayAttempt.objects.exists()  # not yet recorded
        web.send_signal(signal.SIGKILL)
        web.wait(timeout=30)
    assert wait_for(row_unlocked)
    assert not GatewaySession.objects.exists() and GatewayInFlight.objects.count() == 1  # the kill lost the queue
    return answer


def test_a_gateway_killed_after_the_answer_ended_loses_nothing_of_the_exchange(setting):
    start, key, upstream = setting
    asked = [user("fix parser bug 3")]

    def ask(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
            c.sendall(request_bytes(port, key, asked, "short", "turn-1"))
            answer = read_all(c)
        assert b"response.completed" in answer
        return answer

    answer = killed_after_the_end(start, ask)
    (answered,) = [json.loads(line[5:])["item"] for line in answer.decode().split("\n")
                   if line.startswith("data:") and "output_item.done" in line]

    # A gateway process starts again; its first exchange sweeps the killed one's journal: the record is written
    # whole, before this exchange's, which extends it as usual.
    port = free_port()
    start(port)
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(request_bytes(port, key, [*asked, answered, user("now the docs")], "short", "turn-2"))
        assert b"response.completed" in read_all(c)
    assert wait_for(lambda: GatewaySession.objects.filter(requests=2).exists())
    gs = GatewaySession.objects.get()
    history = history_of(gs)
    assert len(history) == 4 and history[0] == asked[0] and history[2] == user("now the docs")
    assert assistant_texts(history) == ["word0 word1 ", "word0 word1 "]  # the killed process's answer, recorded
    assert not GatewayAttempt.objects.exists() and not GatewayInFlight.objects.exists()  # nothing cut
    assert not gs.session.rollout_lines.filter(kind__in=("compacted", "rollback")).exists()
    assert gs.session.rollout_lines.filter(kind="event_msg").count() == 2  # both answers' usage


def test_a_gateway_killed_after_a_claude_answer_ended_loses_nothing_of_the_exchange(setting):
    start, key, upstream = setting
    provider = Provider.objects.create(name="embedded-anthropic", base_url="embedded", wire_api="anthropic",
                                       model="claude-sonnet-4-5", context_window=200_000)
    route = GatewayRoute.objects.create(name="claude-records", provider=provider,
                                        policy=CompactionPolicy.objects.create(name="claude-records"))
    claude_key = do_create_gateway_key(route=route, client_name="laptop").key
    session_id = "5b9c7a1e-0000-4000-8000-000000000041"
    first = {"role": "user", "content": [{"type": "text", "text": "fix the parser"}]}

    def post(port: int, messages: list[dict]) -> bytes:
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True, "system": "Be brief.",
                           "messages": messages, "metadata": {"user_id": json.dumps({"session_id": session_id})}})
        head = (f"POST /gateway/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"x-api-key: {claude_key}\r\nanthropic-version: 2023-06-01\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
            c.sendall(head.encode() + body.encode())
            answer = read_all(c)
        assert b"message_stop" in answer
        return answer

    answer = killed_after_the_end(start, lambda port: post(port, [first]))
    text = "".join(json.loads(line[5:])["delta"].get("text", "") for line in answer.decode().split("\n")
                   if line.startswith("data:") and "content_block_delta" in line)
    assert text

    port = free_port()
    start(port)
    post(port, [first, {"role": "assistant", "content": [{"type": "text", "text": text}]},
                {"role": "user", "content": [{"type": "text", "text": "and the docs"}]}])
    assert wait_for(lambda: GatewaySession.objects.filter(requests=2).exists())
    gs = GatewaySession.objects.get()
    assert gs.route_id == route.pk and not GatewayAttempt.objects.exists() and not GatewayInFlight.objects.exists()
    recorded = history_of(gs)
    said = [i for i in recorded if i.get("role") == "assistant"]
    assert len(said) == 2 and text in json.dumps(said[0])  # the killed process's answer, recorded whole
    assert not gs.session.rollout_lines.filter(kind__in=("compacted", "rollback")).exists()


def test_a_stopped_gateway_writes_every_answered_record_and_the_cut_stream_then_exits_in_bounded_time(setting):
    start, key, upstream = setting
    port = free_port()
    web = start(port)
    threads = [f"0190ffff-0000-7000-8000-00000000000{n}" for n in range(4)]
    with recorder_held_back() as held:
        for n, thread in enumerate(threads):
            with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
                c.sendall(request_bytes(port, key, [user(f"task {n}")], "short", "turn-1", thread=thread))
                assert b"response.completed" in read_all(c)  # answered while its record waits
        assert not GatewaySession.objects.exists()  # every record is still queued
        streaming = socket.create_connection(("127.0.0.1", port), timeout=60)
        streaming.sendall(request_bytes(port, key, [user("a long essay")], "slow", "turn-1",
                                        thread="0190ffff-0000-7000-8000-0000000000ff"))
        assert b"word1 " in read_until(streaming, b"word1 ")
        stopped_at = time.monotonic()
        web.send_signal(signal.SIGTERM)
        threading.Timer(3.0, held.rollback).start()  # the database lets the recorder on, mid-shutdown
        web.wait(timeout=STOP_BOUND_SECONDS + 10)
    took = time.monotonic() - stopped_at
    streaming.close()
    assert took < STOP_BOUND_SECONDS, took
    assert web.returncode is not None
    sessions = {gs.group_key: gs for gs in GatewaySession.objects.all()}
    assert {f"thread:{t}" for t in threads} <= set(sessions)
    for thread in threads:
        gs = sessions[f"thread:{thread}"]
        assert gs.requests == 1 and assistant_texts(history_of(gs)) == ["word0 word1 "]
    (cut,) = GatewayAttempt.objects.all()
    assert cut.cut and "stopped" in cut.error and not GatewayInFlight.objects.exists()
