"""Fault injection for the simulated provider, switched per request by headers (and so per session, whose provider
config puts them in `extra_headers`).

Header grammar::

    X-Sim-Fault: <fault>[;<param>=<value>]... [, <fault>[;<param>=<value>]...]...

    fault   := overloaded | server_error | context_window_exceeded | slow=<seconds> | stream_closed
             | v2_zero | v2_two | compact_malformed | bad_json
    params  := times=<n>        apply to the first n matching requests carrying the same key, then stop
               key=<k>          the counter `times` uses (default: the fault's name); kept per app instance
               status=<code>    overloaded only: 429 (default, with Retry-After) or 503 (code server_is_overloaded)
               retry_after=<s>  overloaded only: the Retry-After value, default 1; `none` sends no header

    X-Sim-Context-Window: <tokens>     the window the input is checked against (default: the app's, else 272000)
                                       (at most MAX_CONTEXT_WINDOW)
    X-Sim-Reasoning-Included: true     the response carries `X-Reasoning-Included: true` (spec §3.2)
    X-Sim-Stream: events               a streamed /responses answer goes out one HTTP chunk per SSE event, as from a
                                       server that flushes each event as it makes it (by default the whole answer,
                                       made at once, goes out in one write)

Where each fault applies (a fault only counts a `times` use on a request it applies to):
overloaded, server_error, context_window_exceeded, slow — every POST endpoint; stream_closed — streamed
`/responses` and `/chat/completions` (the stream ends before `response.completed` / `[DONE]`); v2_zero, v2_two —
`/responses` requests ending with a `compaction_trigger`; compact_malformed (`{"output": "not a list"}`) —
`/responses/compact`; bad_json — a 200 whose body is not JSON on `/responses/compact`, an unparsable event inside
the stream on `/responses` and `/chat/completions`.

Every parameter is capped (issue 14) so one request cannot pin a worker: `slow` at most MAX_SLOW_SECONDS, `times`
at most MAX_TIMES, `retry_after` at most MAX_RETRY_AFTER seconds, `key` at most MAX_KEY_CHARS characters, at most
MAX_FAULTS faults in a header of at most MAX_HEADER_CHARS characters. Anything beyond is a 400.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FAULT_HEADER = "x-sim-fault"
CONTEXT_WINDOW_HEADER = "x-sim-context-window"
REASONING_INCLUDED_HEADER = "x-sim-reasoning-included"
STREAM_HEADER = "x-sim-stream"
STREAM_EVENTS = "events"

FAULTS = frozenset(
    {
        "overloaded",
        "server_error",
        "context_window_exceeded",
        "slow",
        "stream_closed",
        "v2_zero",
        "v2_two",
        "compact_malformed",
        "bad_json",
    }
)
PARAMS = frozenset({"times", "key", "status", "retry_after"})

MAX_SLOW_SECONDS = 30.0
MAX_TIMES = 1000
MAX_RETRY_AFTER = 3600
MAX_KEY_CHARS = 64
MAX_FAULTS = 16
MAX_HEADER_CHARS = 1024
MAX_CONTEXT_WINDOW = 10_000_000
_DIGITS = re.compile(r"[0-9]{1,12}\Z")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses


def is_whole_number(value: str) -> bool:
    return bool(_DIGITS.match(value))

# endpoint names used by the app: "responses", "responses_v2", "compact", "chat", "messages" (Anthropic)
APPLIES_TO = {
    "overloaded": {"responses", "responses_v2", "compact", "chat", "messages"},
    "server_error": {"responses", "responses_v2", "compact", "chat", "messages"},
    "context_window_exceeded": {"responses", "responses_v2", "compact", "chat", "messages"},
    "slow": {"responses", "responses_v2", "compact", "chat", "messages"},
    "stream_closed": {"responses", "responses_v2", "chat", "messages"},
    "v2_zero": {"responses_v2"},
    "v2_two": {"responses_v2"},
    "compact_malformed": {"compact"},
    "bad_json": {"responses", "responses_v2", "compact", "chat"},
}


# What each fault does to a request it hits, in plain words (the session page's fault panel).
EFFECTS = {
    "overloaded": "answers HTTP 429 (rate limit reached; or 503 server overloaded) instead of a reply",
    "server_error": "answers HTTP 500 (internal server error) instead of a reply",
    "context_window_exceeded": "answers that the input exceeds the model's context window",
    "slow": "waits before answering",
    "stream_closed": "ends the streamed reply before it completes",
    "v2_zero": "answers a remote v2 compaction with no compaction item",
    "v2_two": "answers a remote v2 compaction with two compaction items",
    "compact_malformed": "answers a remote v1 compaction with a body whose output is not a list",
    "bad_json": "answers with a body (or a stream event) that is not JSON",
}

# The requests behind each endpoint name of APPLIES_TO, in plain words.
ENDPOINT_WORDS = {
    "responses": "streamed /responses requests (turns, local summaries)",
    "responses_v2": "remote v2 compaction requests",
    "compact": "remote v1 compaction requests (/responses/compact)",
    "chat": "chat-completions requests",
    "messages": "Anthropic messages requests",
}


def requests_hit(name: str) -> str:
    """The requests a fault applies to, in words (APPLIES_TO)."""
    return ", ".join(ENDPOINT_WORDS[e] for e in ENDPOINT_WORDS if e in APPLIES_TO[name])


class FaultSyntaxError(ValueError):
    """The X-Sim-Fault header does not follow the grammar (answered with HTTP 400)."""


@dataclass(frozen=True)
class Fault:
    name: str
    value: str | None = None
    times: int | None = None
    key: str = ""
    params: dict[str, str] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return float(self.value or 0)


def parse_faults(header: str | None) -> list[Fault]:
    """Parse an X-Sim-Fault header value; raise FaultSyntaxError with a clear message when it is malformed."""
    if not header or not header.strip():
        return []
    if len(header) > MAX_HEADER_CHARS:
        raise FaultSyntaxError(f"the fault header is longer than {MAX_HEADER_CHARS} characters")
    specs = [spec for spec in header.split(",") if spec.strip(" ;")]
    if len(specs) > MAX_FAULTS:
        raise FaultSyntaxError(f"at most {MAX_FAULTS} faults in one header")
    faults = []
    for spec in specs:
        parts = [p.strip() for p in spec.split(";") if p.strip()]
        if not parts:
            continue
        name, _, value = parts[0].partition("=")
        name = name.strip()
        if name not in FAULTS:
            raise FaultSyntaxError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
        if name == "slow":
            try:
                if not 0 <= float(value) <= MAX_SLOW_SECONDS:  # also refuses nan and inf
                    raise ValueError
            except ValueError:
                raise FaultSyntaxError(
                    f"slow needs a number of seconds from 0 to {MAX_SLOW_SECONDS:g}, got {value!r}"
                ) from None
        params: dict[str, str] = {}
        for part in parts[1:]:
            key, sep, val = part.partition("=")
            if not sep or key.strip() not in PARAMS:
                raise FaultSyntaxError(f"bad fault parameter {part!r}; known: {', '.join(sorted(PARAMS))}")
            params[key.strip()] = val.strip()
        times = None
        if "times" in params:
            if not is_whole_number(params["times"]):
                raise FaultSyntaxError(f"times must be a non-negative integer, got {params['times']!r}")
            times = int(params["times"])
            if times > MAX_TIMES:
                raise FaultSyntaxError(f"times must be at most {MAX_TIMES}, got {times}")
        if len(params.get("key", "")) > MAX_KEY_CHARS:
            raise FaultSyntaxError(f"key must be at most {MAX_KEY_CHARS} characters")
        retry_after = params.get("retry_after")
        if retry_after is not None and retry_after != "none" and not (
            is_whole_number(retry_after) and int(retry_after) <= MAX_RETRY_AFTER
        ):
            raise FaultSyntaxError(
                f"retry_after must be a whole number of seconds up to {MAX_RETRY_AFTER}, or none; got {retry_after!r}"
            )
        if "status" in params and params["status"] not in ("429", "503"):
            raise FaultSyntaxError(f"overloaded status must be 429 or 503, got {params['status']!r}")
        faults.append(Fault(name=name, value=value or None, times=times, key=params.get("key", name), params=params))
    return faults


@dataclass(frozen=True)
class FaultUse:
    """How often a fault (by name and key) fired on this app instance, and when it last did (a `clock` reading)."""

    fired: int
    last_fired_at: float


class FaultCounter:
    """Counts uses of `times`-limited faults per (fault, key), and every firing of any fault with its time (what the
    session page shows); one per app instance, safe across threads."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._uses: dict[tuple[str, str], int] = {}
        self._fired: dict[tuple[str, str], FaultUse] = {}
        self._clock = clock
        self._lock = threading.Lock()

    def use(self, name: str, key: str) -> FaultUse | None:
        """How often the fault `name` with `key` fired here (None: never)."""
        with self._lock:
            return self._fired.get((name, key))

    def active(self, faults: list[Fault], endpoint: str) -> dict[str, Fault]:
        """The faults that fire on this request, by name (each limited fault's use is counted here)."""
        firing: dict[str, Fault] = {}
        with self._lock:
            for fault in faults:
                if endpoint not in APPLIES_TO[fault.name]:
                    continue
                if fault.times is not None:
                    slot = (fault.name, fault.key)
                    used = self._uses.get(slot, 0)
                    if used >= fault.times:
                        continue
                    self._uses[slot] = used + 1
                firing[fault.name] = fault
                seen = self._fired.get((fault.name, fault.key))
                self._fired[(fault.name, fault.key)] = FaultUse(
                    fired=(seen.fired if seen else 0) + 1, last_fired_at=self._clock())
        return firing
