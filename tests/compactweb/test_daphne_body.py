"""Daphne refuses an oversized body before Twisted reads it, and never parses forms on its reactor (issue 27).

Against a real Daphne process (`python -m daphne compactweb.asgi:application`, as scripts/dev and scale-out run it)
on a free port: a 1 GB upload, declared or chunked, is refused after a bounded number of bytes (a declared one
before any of its body is sent), and `/healthz` keeps answering while uploads run (how fast: the bench,
bench/bench_upload_denial.py, not a timed assertion). The form-parsing rule is checked on the request class itself, fed through
Twisted's own HTTP channel."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
LIMIT = 1024 * 1024  # COMPACTWEB_MAX_REQUEST_BYTES of the Daphne under test
# What a refused sender may still get into the kernel's buffers (both ends, loopback) before its writes fail.
SOCKET_SLACK = 48 * 1024 * 1024
CHUNK = b"a" * 65536
SIM_TOKEN = "daphne-body-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_daphne(tmp: Path):
    """A Daphne process serving compactweb on a free port (SQLite and var dir under `tmp`); yields the port."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_RUN_SIMULATOR")}
    env.update(COMPACTWEB_VAR_DIR=str(tmp), SQLITE_PATH=str(tmp / "db.sqlite3"), PYTHONPATH=str(ROOT),
               DJANGO_SETTINGS_MODULE="compactweb.settings", COMPACTWEB_MAX_REQUEST_BYTES=str(LIMIT),
               COMPACTWEB_SIM_TOKEN=SIM_TOKEN)
    port = _free_port()
    log = tmp / "daphne.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "compactweb.asgi:application"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                if _healthz(port)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def daphne(tmp_path_factory):
    with running_daphne(tmp_path_factory.mktemp("daphne-body")) as port:
        yield port


def _healthz(port: int) -> tuple[int, float]:
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        status = conn.getresponse().status
    finally:
        conn.close()
    return status, time.perf_counter() - started


def _upload(port: int, *, chunked: bool, path: str = "/healthz", content_type: str = "application/octet-stream",
            total: int = GIB) -> dict:
    """Stream `total` bytes of body (never held in memory) until the server stops taking them; what the client saw."""
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: " + str(total).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    received = bytearray()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                received.extend(data)
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    try:
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     + content_type.encode() + b"\r\n" + framing + b"\r\n\r\n")
        frame = (b"%x\r\n" % len(CHUNK)) + CHUNK + b"\r\n" if chunked else CHUNK
        while sent < total:
            sock.sendall(frame)
            sent += len(CHUNK)
    except OSError:
        pass
    finally:
        reader.join(timeout=20)
        sock.close()
    return {"sent": sent, "response": bytes(received)}


def _status(response: bytes) -> int | None:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


def test_a_declared_gigabyte_is_refused_with_413_before_it_is_read(daphne):
    outcome = _upload(daphne, chunked=False)

    assert outcome["sent"] < SOCKET_SLACK, f"the server read {outcome['sent']} bytes of a refused body"
    assert _status(outcome["response"]) == 413
    head, _, body = outcome["response"].partition(b"\r\n\r\n")
    assert b"100 Continue" not in head
    assert json.loads(body)["error"]["code"] == "request_too_large"


def test_a_chunked_gigabyte_is_cut_off_at_the_limit(daphne):
    outcome = _upload(daphne, chunked=True)

    assert outcome["sent"] < LIMIT + SOCKET_SLACK, f"the server read {outcome['sent']} bytes of a chunked body"
    # The 413 is written before the close; a client that is still sending may see the reset first.
    assert _status(outcome["response"]) in (413, None)


def _exchange(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(raw)
        received = b""
        while data := sock.recv(65536):
            received += data
    return received


def test_a_body_under_the_limit_still_reaches_the_app(daphne):
    head = (b"POST /sim/v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            b"Authorization: Bearer " + SIM_TOKEN.encode() + b"\r\n")
    declared = _exchange(daphne, head + b"Content-Length: 5\r\n\r\nhello")
    chunked = _exchange(daphne, head + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")

    # The simulated model read the five bytes (an empty body would be "must be a JSON object").
    for answer in (declared, chunked):
        assert _status(answer) == 400
        assert b"request body is not valid JSON" in answer


def test_the_import_path_keeps_its_larger_limit_in_daphne(daphne):
    """The request line is read before the headers: the rollout import's limit (64 MiB) applies to its path, so a
    2 MiB body (twice this Daphne's request limit) reaches Django, which answers an anonymous caller 401."""
    body = b"x" * (2 * LIMIT)
    answer = _exchange(daphne, b"POST /api/v1/sessions/import HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                       b"Content-Type: application/x-ndjson\r\nContent-Length: " + str(len(body)).encode()
                       + b"\r\n\r\n" + body)
    assert _status(answer) == 401
    refused = _exchange(daphne, b"POST /api/v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    assert _status(refused) == 413


def test_a_large_urlencoded_body_is_refused_without_parsing(daphne):
    outcome = _upload(daphne, chunked=False, content_type="application/x-www-form-urlencoded", total=70 * 1024**2)

    assert _status(outcome["response"]) == 413
    assert outcome["sent"] < SOCKET_SLACK


UPLOADS = (  # what froze a process before: a spooled gigabyte, declared or chunked, and a form parsed in memory
    {"chunked": False},
    {"chunked": True},
    {"chunked": False, "content_type": "application/x-www-form-urlencoded", "total": 70 * 1024**2},
)


def test_a_declared_gigabyte_gets_its_413_before_a_single_body_byte_is_sent(daphne):
    """The refusal needs nothing of the body: the client sends the headers only and reads the answer."""
    with socket.create_connection(("127.0.0.1", daphne), timeout=20) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded"
                     b"\r\nContent-Length: " + str(GIB).encode() + b"\r\n\r\n")
        received = b""
        while b"\r\n\r\n" not in received and (data := sock.recv(65536)):
            received += data
    assert _status(received) == 413


def test_healthz_keeps_answering_while_gigabyte_uploads_run(daphne):
    """Every probe made while an upload is in flight answers 200 within the probe's own timeout (10 s; the frozen
    reactor of issue 27 took 64 s). How fast it answers (the issue's 100 ms) depends on the machine's load, so the
    figures are measured by bench/bench_upload_denial.py against an idle floor, not asserted here."""
    in_flight = threading.Event()
    stop = threading.Event()
    done = []

    def upload_until_stopped() -> None:
        while not stop.is_set():
            in_flight.set()
            done.append(_upload(daphne, **UPLOADS[len(done) % len(UPLOADS)]))
            in_flight.clear()

    uploader = threading.Thread(target=upload_until_stopped, daemon=True)
    uploader.start()
    try:
        during = 0
        while during < 20 or len(done) < 2 * len(UPLOADS):
            flying = in_flight.is_set()
            status, _ = _healthz(daphne)  # raises on a probe that gets no answer in 10 s
            assert status == 200
            during += flying and in_flight.is_set()  # an upload ran for the whole probe
    finally:
        stop.set()
        uploader.join(timeout=120)

    assert all(_status(outcome["response"]) in (413, None) for outcome in done)
    assert all(outcome["sent"] < LIMIT + SOCKET_SLACK for outcome in done)


def test_twisted_never_parses_a_form_body():
    """Fed through Twisted's HTTPChannel: a urlencoded and a multipart POST leave `args` with the query alone."""
    from daphne.http_protocol import HTTPFactory
    from twisted.internet.testing import StringTransport

    from compactweb import daphne_body

    assert daphne_body.install()
    seen = []

    class Server:
        root_path = ""
        proxy_forwarded_address_header = None
        server_name = "daphne"

        def protocol_connected(self, request):
            seen.append(request)

        def protocol_disconnected(self, request):
            pass

        def create_application(self, request, scope):
            return None  # stop here: only Twisted's handling of the body is under test

    factory = HTTPFactory(Server())
    for content_type, body in (
        (b"application/x-www-form-urlencoded", b"a=1&b=2"),
        (b"multipart/form-data; boundary=xx", b"--xx\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--xx--\r\n"),
    ):
        channel = factory.buildProtocol(("127.0.0.1", 1))
        channel.makeConnection(StringTransport())
        channel.dataReceived(b"POST /healthz?q=1 HTTP/1.1\r\nHost: x\r\nContent-Type: " + content_type
                             + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        request = seen[-1]
        assert isinstance(request, HTTPFactory.bounded_request_class)
        assert request.args == {b"q": [b"1"]}
        request.content.seek(0)
        assert request.content.read() == body  # the body is kept for the app, unparsed
