"""Shipping a Codex sessions folder (or a Claude Code projects folder) to a compactweb server on another machine (issue 30):
`manage.py follow_rollouts FOLDER --to URL --token KEY`.

The folder is watched like a local follow (sessions_app.transfer.follow.Follower, with this module's `sync`), but
each file's new complete lines are POSTed to `/api/v1/shipped-files/lines` with the byte offset they start at,
at most `batch_bytes` at a time; the server applies a batch only at the offset it has
(sessions_app.transfer.shipped). The server is the one record of how far a file got: a (re)started shipper asks it
(`/api/v1/shipped-files/offset`), and after a `409 offset_mismatch` (a batch whose answer was lost) it asks again,
so nothing is lost or sent twice across an outage or a restart of either side. A file shorter than what the server
has was rewritten: it is sent again from its start with `replaces`, and the server follows it as a new session
linked to the old one. Codex rollouts and Claude Code transcripts are shipped alike (the server tells them apart). The file itself is the buffer:
the shipper holds one batch in memory, whatever the outage's length. A network error or a 5xx is retried with
exponential back-off (from `backoff` seconds up to `max_backoff`), without reading anything new meanwhile.
"""

from __future__ import annotations

import base64
import logging
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import httpx

from sessions_app.codex_rollout.tail import read_new_lines
from sessions_app.transfer.follow import SyncResult

logger = logging.getLogger(__name__)

BATCH_BYTES = 1 << 20
LINES_PATH = "/api/v1/shipped-files/lines"
OFFSET_PATH = "/api/v1/shipped-files/offset"


class ShipperRefused(Exception):
    """The server refused the shipper itself (its token or role): retrying cannot help."""


@dataclass(frozen=True, kw_only=True)
class Server:
    """The compactweb server a shipper sends to: its address, an operator's API token, the timeout of one
    request, and (tests) the HTTP transport instead of the network."""

    url: str
    token: str
    timeout: float = 30.0
    transport: httpx.BaseTransport | None = None

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url.rstrip("/"), timeout=self.timeout, transport=self.transport,
                            headers={"Authorization": f"Token {self.token}"})


class Shipper:
    def __init__(self, root: Path, *, server: Server, name: str = "", batch_bytes: int = BATCH_BYTES,
                 backoff: float = 0.5, max_backoff: float = 30.0, stop: threading.Event | None = None) -> None:
        self.root = Path(root)
        self.name = name or socket.gethostname()
        self.batch_bytes, self.backoff, self.max_backoff = batch_bytes, backoff, max_backoff
        self.stop = stop or threading.Event()
        self.client = server.client()
        self.offsets: dict[str, int] = {}  # what the server had at the last answer, per file key
        self.retries = 0  # requests retried after a network error or a 5xx (tests and the command read it)

    def key(self, path: Path) -> str:
        """The file's key on the server: this machine's name and its path under the folder."""
        return f"{self.name}/{Path(path).resolve().relative_to(self.root.resolve()).as_posix()}"

    def check(self) -> None:
        """One request that fails fast with ShipperRefused on a bad token or role (before following)."""
        self._request("GET", OFFSET_PATH, params={"file": f"{self.name}/"})

    def sync(self, *, path: Path, provider=None, policy=None) -> SyncResult:
        """Send what the server does not have of one file, a batch at a time (a Follower's `sync`)."""
        key = self.key(path)
        sent = 0
        session = None
        while not self.stop.is_set():
            if key not in self.offsets:
                answer = self._request("GET", OFFSET_PATH, params={"file": key}).json()
                self.offsets[key], session = answer["offset"], answer["session"]
            offset = self.offsets[key]
            body = {"file": key, "name": path.name}
            if path.stat().st_size < offset:
                # Rewritten (shorter than what the server has): sent again from its start, as a new session
                # linked to the old one, like a local follower's rewrite (sessions_app.transfer.shipped).
                logger.warning("ship: %s is shorter than the %s bytes the server has: rewritten; sending it anew",
                               key, offset)
                body["replaces"], offset = offset, 0
            new = read_new_lines(path, offset, limit=self.batch_bytes)
            if not new.lines:
                break
            data = b"".join(new.lines)
            response = self._request("POST", LINES_PATH, json={
                **body, "offset": offset, "data": base64.b64encode(data).decode()})
            if response.status_code == 409 and _code(response) == "offset_mismatch":
                del self.offsets[key]  # an earlier answer was lost: ask where the server is
                continue
            if response.status_code >= 400:
                detail = _message(response)
                logger.warning("ship: %s refused: %s", key, detail)
                return SyncResult(key, "refused", session, sent, detail)
            answer = response.json()
            self.offsets[key], session = answer["offset"], answer["session"]
            sent += answer["lines"]
        return SyncResult(key, "shipped" if sent else "unchanged", session, sent)

    def _request(self, method: str, url: str, **kwargs) -> httpx.Response:
        """One request, retried with back-off while the server cannot be reached or answers 5xx."""
        delay = self.backoff
        while True:
            try:
                response = self.client.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                reason = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code in (401, 403):
                    raise ShipperRefused(f"the server refused the token: {_message(response)}")
                if response.status_code < 500 and not (response.status_code == 429):
                    return response
                reason = f"HTTP {response.status_code}"
            self.retries += 1
            logger.warning("ship: %s %s failed (%s); retrying in %.1f s", method, url, reason, delay)
            if self.stop.wait(delay):
                raise ShipperStopped
            delay = min(delay * 2, self.max_backoff)

    def close(self) -> None:
        self.client.close()


class ShipperStopped(Exception):
    """Stopped while waiting to retry."""


def _code(response: httpx.Response) -> str:
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return ""


def _message(response: httpx.Response) -> str:
    try:
        return response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"
