"""Real local receivers for the alert-delivery tests: an HTTP server (Slack-style and JSON webhooks) and an SMTP
server (aiosmtpd), each on a free loopback port in a thread of its own, recording what arrived. Either can be made
slow (it answers after `delay` seconds) and a port nobody listens on stands for a receiver that is down."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class HttpReceiver:
    server: ThreadingHTTPServer
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    delay: float = 0.0
    status: int = 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Received]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.received) >= n, timeout=timeout)
            return list(self.received)


def start_http_receiver() -> HttpReceiver:
    holder: dict = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            receiver = holder["r"]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with receiver.arrived:
                receiver.received.append(Received(self.path, dict(self.headers.items()), body))
                receiver.arrived.notify_all()
            if receiver.delay:
                time.sleep(receiver.delay)
            try:
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:
                pass  # the sender gave up waiting (the slow receiver's case)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = HttpReceiver(server)
    holder["r"] = receiver
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receiver


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    content: bytes


class _Handler:
    def __init__(self) -> None:
        self.mails: list[Mail] = []
        self.arrived = threading.Condition()
        self.delay = 0.0

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        if self.delay:
            import asyncio

            await asyncio.sleep(self.delay)
        with self.arrived:
            self.mails.append(Mail(envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
            self.arrived.notify_all()
        return "250 Message accepted for delivery"


class SmtpReceiver:
    def __init__(self) -> None:
        self.handler = _Handler()
        self.port = free_port()
        self.controller = Controller(self.handler, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    @property
    def mails(self) -> list[Mail]:
        return self.handler.mails

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Mail]:
        with self.handler.arrived:
            self.handler.arrived.wait_for(lambda: len(self.handler.mails) >= n, timeout=timeout)
            return list(self.handler.mails)

    def stop(self) -> None:
        self.controller.stop()


def free_port() -> int:
    """A loopback port nobody listens on (once this returns): a receiver that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
