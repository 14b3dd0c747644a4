"""What the simulated model received, written down: one JSON line per request (issue 13, item 7).

A test or an operator that points a real client (the Codex CLI) at `/sim/v1` can then compare what compactweb
holds with what the client actually sent: after a compaction, the client's next `input` is its live history.
Off unless a directory is configured (`COMPACTWEB_SIM_RECORD_DIR`); the file is `requests.jsonl` in it.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from compaction_app.engine.history_snapshot import as_list

RECORD_FILE = "requests.jsonl"
# Headers worth keeping to tell requests apart; never authorization or cookies.
KEPT_HEADERS = ("session-id", "thread-id", "x-codex-window-id", "originator", "x-client-request-id")


class RequestRecorder:
    """Appends `{"at", "endpoint", "headers", "body"}` per request to `<directory>/requests.jsonl`."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / RECORD_FILE
        self._lock = threading.Lock()

    def record(self, *, endpoint: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        line = {
            "at": time.time(),
            "endpoint": endpoint,
            "headers": {k: headers[k] for k in KEPT_HEADERS if k in headers},
            "body": {**body, "input": as_list(body["input"])} if "input" in body else body,
        }
        data = json.dumps(line, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(data)


def read_requests(directory: str | Path) -> list[dict[str, Any]]:
    """Every recorded request, oldest first (an empty list when nothing was recorded)."""
    path = Path(directory) / RECORD_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
