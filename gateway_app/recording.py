"""Recording what passes through the gateway as a compactweb session (issue 29).

One Codex session is one compactweb session (source `gateway`), found by its thread id (turn metadata), else its
prompt cache key, else the digest of its first history items. Each exchange is written in the line kinds an
imported rollout uses (`response_item`, `turn_context`, `event_msg` `token_count`, `compacted`), so the session
page, the inspector, retention, alerts and export work on it as on any session:

- the request's history (its input without the base instructions) extends what is recorded: the new items are
  appended; it does not (Codex installed a compaction, or rewrote its history): a `compacted` line whose
  replacement is the request's history, labelled with the compaction request that came before (v2 keeps its
  `compaction_response_id`, a local summary its message), so the live history is always what the upstream got;
- the answer's output items and usage follow; a compaction request's answer becomes that pending compaction;
- a request that failed (upstream status, transport, client gone) is a GatewayAttempt; history is not touched.

Runs on the recorder's thread after the answer has streamed (`recorder`), never in the stream's path, which hands
over the answer's raw bytes (read here, `settled`); one Codex session's exchanges are written in order (one
recorder thread per process, and the GatewaySession row lock here across processes).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from compaction_app.engine.items import is_real_user_message, message_text
from compaction_app.models import Compaction
from gateway_app import anthropic_wire, wire
from gateway_app.models import GatewayAttempt, GatewayInFlight, GatewayRoute, GatewaySession
from sessions_app.gateway_surface import (
    GATEWAY_REQUESTS,
    LOCAL,
    REMOTE_V1,
    REMOTE_V2,
    ClientOrigin,
    ItemValidationError,
    Labels,
    LiveItem,
    NewLine,
    RolloutLine,
    Session,
    append_rollout_lines,
    create_compactions,
    do_create_session,
    labels_line,
    live_alerts,
    publish_transient,
    usage_line,
    validate_item,
)
from sessions_app.gateway_surface import projection as p

logger = logging.getLogger(__name__)

GATEWAY_SOURCE = "gateway"
ORIGINATOR = "compactweb_gateway"
_LABELS = {wire.COMPACTION_V2: REMOTE_V2, wire.COMPACTION_V1: REMOTE_V1, wire.COMPACTION_LOCAL: LOCAL}
_SEEN = {wire.COMPACTION_V2: "a streamed /responses compaction (compaction_trigger) passed the gateway: remote v2",
         wire.COMPACTION_V1: "a /responses/compact request passed the gateway: remote v1",
         wire.COMPACTION_LOCAL: "a compaction-kind /responses request (the summarization prompt) passed the "
                                "gateway: local summarization"}

CLAUDE_SUMMARY_SEEN = ("Claude Code's summary request (its compaction prompt) passed the gateway: Claude Code "
                       "summarises with a model request of its own")

# How Claude Code records its /compact command in the conversation it sends next (2.1.332).
CLAUDE_COMPACT_COMMAND = "<command-name>/compact</command-name>"
CLAUDE_COMPACT_SEEN = ("the conversation Claude Code sent after the compaction records its /compact command "
                       "(<command-name>/compact</command-name>): the user asked for it")


@dataclass(frozen=True)
class Exchange:
    """One request through the gateway and what came back."""

    route_id: int
    key_id: int | None
    client_name: str
    group: str
    endpoint: str
    kind: str
    meta: dict[str, Any]
    base_instructions: str
    history: list[dict[str, Any]]
    model: str
    status: int
    output: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    response_id: str = ""
    error: str = ""
    # The id of the provider in the client's config.toml, as Codex writes it in its session_meta (so an export
    # resumes): "openai" for the built-in provider (recognised by its `version` header, wire.client_provider), else
    # the route's name (docs/gateway.md: name the custom provider after the route). With the client's version and
    # Codex session source (wire.client_version, wire.client_source), for the same session_meta.
    client_provider: str = ""
    client_version: str = ""
    client_source: str = ""
    # compactweb mode forwarded this compaction request because the route policy's compaction could not leave the
    # client room to work (GatewayRoute.Fallback.UPSTREAM): why, kept with the compaction Codex installs.
    fallback: str = ""
    # The upstream's answer as it passed (the proxy keeps the raw chunks and parses nothing on the stream's path);
    # `settled` reads it into output, usage, response id and error on the recorder's thread.
    answer: tuple[bytes, ...] = ()
    answer_format: str = ""  # SSE or JSON (a successful answer to read), "" (nothing to read)
    # The token of the exchange's journal row (gateway_app.journal), deleted with the record's writing.
    begun: uuid.UUID | None = None
    # When the gateway process accepted the request (Unix time; 0: not known): what orders one session's records
    # that different processes write (history_lines).
    accepted: float = 0.0

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300 and not self.error


SSE = "sse"
JSON = "json"
CLIENT_GONE = "the client disconnected mid-stream"
# The sources of the `rollback` lines the gateway writes when a client's history changes without a compaction
# (never a `compacted` line: no Compaction row, no alert counts them).
CLIENT_REWRITE = "client_rewrite"
CLIENT_RETRY = "client_retry"
# compactweb mode for Claude Code: the pending kind after the policy's summary answered its summary request, and the
# source of the `rollback` line that installs Claude Code's next history (gateway_app.anthropic_compaction).
CLAUDE_COMPACTWEB = "claude_code_compactweb"
CLAUDE_CODE_SUMMARY = "claude_code_summary"


def settled(exchange: Exchange) -> Exchange:
    """The exchange with its raw answer read: output items, usage, response id, and the error of a stream that
    ended without `response.completed` or an answer that is not JSON."""
    if not exchange.answer_format:
        if exchange.answer and not exchange.error:  # an upstream error status: its body is the error
            text = b"".join(exchange.answer).decode("utf-8", "replace")[:2000]
            return dataclasses.replace(exchange, answer=(), error=text or f"HTTP {exchange.status}")
        return dataclasses.replace(exchange, answer=())
    if exchange.answer_format in (anthropic_wire.SSE, anthropic_wire.JSON):  # Claude Code's (issue 44)
        summary, error = anthropic_wire.read_answer(exchange.answer_format, b"".join(exchange.answer))
        error = exchange.error or error
    elif exchange.answer_format == SSE:
        reader = wire.SseReader()
        reader.feed(b"".join(exchange.answer))
        summary = reader.finish()
        error = exchange.error
        if not error and not summary.completed:
            error = summary.error or "the stream closed before response.completed"
    else:
        try:
            summary, error = wire.summary_of_json(json.loads(b"".join(exchange.answer))), exchange.error
        except ValueError:
            summary, error = wire.StreamSummary(), exchange.error or "the upstream's answer is not JSON"
    return dataclasses.replace(exchange, answer=(), answer_format="", output=summary.output, usage=summary.usage,
                               response_id=summary.response_id, error=error,
                               status=0 if error == CLIENT_GONE else exchange.status)


def _title(route: GatewayRoute, client: str, history: list[dict[str, Any]]) -> str:
    first = next((message_text(i) for i in history if is_real_user_message(i)), "")
    text = " ".join(first.split())[:80]
    return f"{client} via {route.name}" + (f": {text}" if text else "")


def _thread_uuid(exchange: Exchange) -> uuid.UUID | None:
    for key in ("thread_id", "session_id"):
        try:
            return uuid.UUID(str(exchange.meta.get(key)))
        except ValueError:
            continue
    return None


def _create(exchange: Exchange, route: GatewayRoute, group: str) -> GatewaySession:
    thread = _thread_uuid(exchange)
    if thread is not None and Session.objects.filter(thread_id=thread).exists():
        thread = None  # e.g. the same Codex session also followed from its rollout file: a fresh id here
    session = do_create_session(
        title=_title(route, exchange.client_name, exchange.history), provider=route.provider, policy=route.policy,
        base_instructions=exchange.base_instructions, origin=ClientOrigin(
            thread_id=thread, source=GATEWAY_SOURCE, originator=ORIGINATOR,
            model_provider=exchange.client_provider or route.name, cwd=wire.client_cwd(exchange.history),
            cli_version=exchange.client_version, client_source=exchange.client_source))
    return GatewaySession.objects.create(
        session=session, route=route, key_id=exchange.key_id, client_name=exchange.client_name, group_key=group,
        prefix_digest=wire.prefix_digest(exchange.history))


def gateway_session_for(exchange: Exchange) -> GatewaySession:
    """The session of this exchange's Codex session, created on its first request. Runs in a transaction; the row
    is locked, so two processes recording one session write in turn.

    A session is its caller's (route and key): the same thread id, cache key or history prefix sent with another
    key finds nothing of the other caller's and starts a session of its own."""
    mine = GatewaySession.objects.filter(route_id=exchange.route_id, key_id=exchange.key_id)
    group = exchange.group
    if not group:
        digest = wire.prefix_digest(exchange.history)
        found = (mine.filter(prefix_digest=digest).order_by("-updated").values_list("group_key", flat=True).first())
        group = found or wire.prefix_group(exchange.history)
    existing = mine.select_for_update().filter(group_key=group).first()
    if existing is not None:
        return existing
    # The route with its provider and policy (a wide read) only for a new session: every later request has its row.
    route = GatewayRoute.objects.select_related("provider", "policy").get(pk=exchange.route_id)
    try:
        with transaction.atomic():
            return _create(exchange, route, group)
    except IntegrityError:  # another process created it first
        return mine.select_for_update().get(group_key=group)


def live_history(session_id: int) -> list[dict[str, Any]]:
    return list(LiveItem.objects.filter(session_id=session_id).order_by("position").values_list("item", flat=True))


class _Known:
    """The history and turn id the recorder left per session, valid while the session's `last_seq` is the one it
    left: a Codex session's next request then costs no read of its whole history. Used on the recorder thread
    (and by the journal's sweep); anything else that writes to the session (a compaction, another process) moves `last_seq`, and the
    history is read again."""

    def __init__(self, limit: int = 256) -> None:
        self._entries: dict[int, tuple[int, list[dict[str, Any]], str]] = {}
        self._limit = limit
        # The journal's sweep records on its own thread too (gateway_app.journal): the eviction's iteration must
        # not meet the recorder's insert.
        self._lock = threading.Lock()

    def get(self, session: Session) -> tuple[list[dict[str, Any]], str]:
        entry = self._entries.get(session.pk)
        if entry is not None and entry[0] == session.last_seq:
            return entry[1], entry[2]
        return live_history(session.pk), _last_turn_id(session)

    def put(self, session_id: int, last_seq: int, history: list[dict[str, Any]], turn_id: str) -> None:
        with self._lock:
            self._entries.pop(session_id, None)
            if len(self._entries) >= self._limit:
                self._entries.pop(next(iter(self._entries)))
            self._entries[session_id] = (last_seq, history, turn_id)


_known = _Known()


def _valid_items(items: list[dict[str, Any]], gs: GatewaySession) -> list[dict[str, Any]]:
    kept = []
    for n, item in enumerate(items):
        try:
            kept.append(validate_item(item, f"items[{n}]"))
        except ItemValidationError as exc:  # kept out of the history; the next request shows the gap
            logger.warning("gateway session %s: an item was not recorded: %s", gs.session_id, exc)
    return kept


def _record_failure(exchange: Exchange, gs: GatewaySession | None) -> None:
    GatewayAttempt.objects.create(gateway_session=gs, route_id=exchange.route_id, endpoint=exchange.endpoint,
                                  request_kind=exchange.kind, status=exchange.status, error=exchange.error[:4000])


def count_request(gs: GatewaySession, by: int = 1, **fields: Any) -> None:
    """Count `by` more requests on the (locked) gateway row, with any other `fields` in the same UPDATE, and tell
    the session's page once committed: the card's count is live."""
    if not by:
        GatewaySession.objects.filter(pk=gs.pk).update(**fields)
        return
    GatewaySession.objects.filter(pk=gs.pk).update(requests=gs.requests + by, **fields)
    _publish_count(gs, gs.requests + by)


def count_answered(gs: GatewaySession, *, detail: dict[str, Any] | None = None) -> None:
    """Count one more request on a gateway row not locked here (a compaction request, counted as answered, or a
    cut exchange), and tell the session's page as `count_request` does (with `detail`'s other parts of the card)."""
    GatewaySession.objects.filter(pk=gs.pk).update(requests=F("requests") + 1)
    _publish_count(gs, GatewaySession.objects.filter(pk=gs.pk).values_list("requests", flat=True).get(), detail)


def _publish_count(gs: GatewaySession, requests: int, detail: dict[str, Any] | None = None) -> None:
    transaction.on_commit(lambda: publish_transient(session_id=gs.session_id, after_seq=0, kind=GATEWAY_REQUESTS,
                                                    detail={"requests": requests, **(detail or {})}, fleet=False))


def do_record_exchange(*, exchange: Exchange) -> GatewaySession | None:
    """Write one exchange into its session (see the module docstring)."""
    exchange = settled(exchange)
    with transaction.atomic():
        # Recorded: no longer an exchange begun and never finished. Its row gone means a sweep finished it already
        # (recorded it whole from the journal, or cut it past the age bound): once is all (gateway_app.journal).
        if exchange.begun is not None and not GatewayInFlight.objects.filter(pk=exchange.begun).delete()[0]:
            logger.info("gateway: exchange %s was finished by the journal's sweep; not recorded again",
                        exchange.begun)
            return None
        if not exchange.ok and not exchange.history:
            _record_failure(exchange, None)
            return None
        gs = gateway_session_for(exchange)
        if not exchange.ok:
            count_request(gs)
            _record_failure(exchange, gs)
            return gs
        session = Session.objects.select_related("provider", "policy").get(pk=gs.session_id)
        live, turn_id = _known.get(session)
        lines, labels, pending = history_lines(gs=gs, session=session, exchange=exchange, live=live, turn_id=turn_id)
        if lines is None:  # what it carried is recorded already (a later request recorded first)
            count_request(gs)
            return gs
        newest = max(gs.last_accepted or 0.0, exchange.accepted) or None
        if exchange.kind in wire.COMPACTION_KINDS:
            text = "".join(message_text(i) for i in exchange.output
                           if i.get("type") == "message" and i.get("role") == "assistant")
            pending = {"kind": exchange.kind, "response_id": exchange.response_id, "phase": phase_of(exchange.history),
                       "summary": text if exchange.kind == wire.COMPACTION_LOCAL else "",
                       **({"fallback": exchange.fallback} if exchange.fallback else {})}
            if is_claude_code(exchange):
                pending["call_usage"] = _call_usage(gs.pending_compaction, exchange.usage)
                pending["seen"] = CLAUDE_SUMMARY_SEEN
        else:
            lines += [NewLine(p.RESPONSE_ITEM, i) for i in _valid_items(exchange.output, gs)]
        if exchange.usage and not (is_claude_code(exchange) and exchange.kind in wire.COMPACTION_KINDS):
            lines.append(usage_line(usage=_codex_usage(exchange.usage),
                                    model_context_window=session.provider.usable_context_window))
        # One UPDATE for the request count and what stays pending (the row is locked since gateway_session_for).
        count_request(gs, pending_compaction=pending, last_accepted=newest)
        if lines:
            rows = append_rollout_lines(session=session, lines=lines)
            compacted = [r for r in rows if r.kind == p.COMPACTED]
            if compacted:  # live compactions: a storm counts them (imported history is never counted)
                create_compactions(session, rows, {compacted[0].seq: labels} if labels else None, live=True)
            # The alert rules run on a gateway session as on a followed one, as its lines arrive (issue 44).
            live_alerts.run_alert_rules(session=session, rows=rows, before=list(live) if compacted else None)
            history, turn_id = _folded(live, turn_id, lines)
            last_seq = session.last_seq
            transaction.on_commit(lambda: _known.put(session.pk, last_seq, history, turn_id))
        return gs


def _folded(live: list[dict[str, Any]], turn_id: str, lines: list[NewLine]) -> tuple[list[dict[str, Any]], str]:
    """The history and turn id after `lines`: the projection's own fold for the items (so what is kept here is
    what a read of the live history would give), the newest turn context's id."""
    history = p.fold_items(list(live), [(line.kind, line.payload) for line in lines])
    turns = [line.payload.get("turn_id") for line in lines if line.kind == p.TURN_CONTEXT]
    return history, str(turns[-1] or "") if turns else turn_id


def history_lines(*, gs: GatewaySession, session: Session, exchange: Exchange,
                  live: list[dict[str, Any]] | None = None, turn_id: str | None = None,
                  ) -> tuple[list[NewLine] | None, Labels | None, dict[str, Any] | None]:
    """The lines that bring the recorded history (`live`, read when not given) to the request's history: (lines,
    the labels of a compaction among them, what stays pending). No lines (None) when the record is behind: what
    it carried is recorded already, and its answer too (`_behind`)."""
    if live is None:
        live, turn_id = live_history(session.pk), _last_turn_id(session)
    history = exchange.history
    lines: list[NewLine] = []
    labels = None
    pending = gs.pending_compaction
    turn = str(exchange.meta.get("turn_id") or "")
    if turn and turn != turn_id:
        lines.append(NewLine(p.TURN_CONTEXT, {"turn_id": turn, "model": exchange.model, "source": "gateway",
                                             "window_id": str(exchange.meta.get("window_id") or "")}))
    shared = wire.common_prefix(live, history)
    if shared == len(live):
        lines += [NewLine(p.RESPONSE_ITEM, i) for i in _valid_items(history[shared:], gs)]
        return lines, None, None  # an extension: a compaction asked for before was not installed by Codex
    if exchange.accepted and gs.last_accepted and exchange.accepted < gs.last_accepted:
        # Not an extension, and a request the client sent after this one is recorded already (another process
        # took it): the client went on from there, so this late record changes nothing, neither as a retry nor
        # as a rewrite of the history the later request made.
        return None, None, pending
    if shared == len(history) and is_claude_code(exchange) and exchange.kind in wire.COMPACTION_KINDS:
        # Claude Code's summary request can send a prefix of the recorded history: compacting mid-turn (2.1.332)
        # it leaves out the newest answer (a tool call it has run), and it may summarise up to some point and keep
        # its newest messages verbatim after the summary ("The messages after this summary are the most recent
        # messages from before compaction"). Neither is a retry: nothing is undone, and the compaction stays
        # pending until its next request installs it.
        return lines, None, pending
    if shared == len(history):
        return _behind(live, exchange, lines, pending)
    if pending and pending.get("kind") == CLAUDE_COMPACTWEB:  # Claude Code took compactweb's summary (issue 44)
        labelled = (_labels_of_answered(pending["compaction_id"], manual=_claude_compact_command(history))
                    if pending.get("compaction_id") else None)
        lines.append(NewLine(p.ROLLBACK, {
            "source": CLAUDE_CODE_SUMMARY, "replacement_history": _valid_items(history, gs),
            "removed_count": len(live) - shared, "kept_count": shared, "compaction_id": pending.get("compaction_id"),
            "reason": "Claude Code continues from the summary compactweb's policy gave it, in its own framing: the "
                      "compaction is recorded already"}))
        return lines + ([labelled] if labelled else []), None, None
    if not pending:  # no compaction explains it: the client rewrote its history (a resume, an edit)
        lines.append(NewLine(p.ROLLBACK, {
            "source": CLIENT_REWRITE, "replacement_history": _valid_items(history, gs),
            "removed_count": len(live) - shared, "kept_count": shared,
            "reason": "the client sent a history that does not extend the recorded one, and no compaction "
                      "asked for before explains it"}))
        return lines, None, None
    # Codex installed the compaction it asked for before.
    payload: dict[str, Any] = {"message": (pending or {}).get("summary", ""),
                               "replacement_history": _valid_items(history, gs)}
    kind = (pending or {}).get("kind")
    if kind == wire.COMPACTION_V2 and pending.get("response_id"):
        payload["compaction_response_id"] = pending["response_id"]
    lines.append(NewLine(p.COMPACTED, payload))
    if (pending or {}).get("call_usage"):
        lines.append(NewLine(p.EVENT_MSG, {"type": p.COMPACTION_USAGE, "source": "gateway",
                                           "info": {"last_token_usage": pending["call_usage"]}}))
    if kind in _LABELS:
        implementation, strategy = _LABELS[kind]
        labels = Labels(implementation=implementation, strategy=strategy, phase=pending.get("phase") or "pre_turn",
                        trigger="auto",
                        reason="context_limit", inferred={"implementation": (pending.get("seen") or _SEEN[kind]) + (
                            f"; compactweb mode forwarded it to the upstream: {pending['fallback']}"
                            if pending.get("fallback") else "")})
        if pending.get("seen") == CLAUDE_SUMMARY_SEEN and _claude_compact_command(history):
            labels = dataclasses.replace(labels, trigger="manual", reason="user_requested", phase="standalone_turn",
                                         inferred={**labels.inferred, "trigger": CLAUDE_COMPACT_SEEN})
        # The rollout says the labels (the compacted line before it): an export has no turns to infer them from.
        lines.append(labels_line(trigger=labels.trigger, reason=labels.reason, phase=labels.phase,
                                 inferred=labels.inferred))
    return lines, labels, None


def _behind(live: list[dict[str, Any]], exchange: Exchange, lines: list[NewLine],
            pending: dict[str, Any] | None) -> tuple[list[NewLine] | None, None, dict[str, Any] | None]:
    """The request's history is a prefix of the recorded one: the record of a request that another process
    recorded a later request of first (that later history carried this one's answer on), or a retry of the
    newest request. Records are applied in the order the client sent them, so it changes nothing already there:
    - its answer is where the recorded history has it: nothing to add (no lines: None);
    - what follows in the record is only the model's answer to this same history (no input of the client's came
      after it): a retry that the client took the new answer of, so the retry's answer replaces the old one (one
      exchange, not two);
    - else the client moved on without this answer (a later request is recorded): nothing to add.
    (A Claude Code summary request that leaves out the newest messages never comes here: `history_lines` keeps it
    pending first.)"""
    rest = live[len(exchange.history):]
    answer = [wire.wire_form(i) for i in exchange.output]
    if [wire.wire_form(i) for i in rest[:len(answer)]] == answer or any(_client_input(i) for i in rest):
        return None, None, pending
    lines.append(NewLine(p.ROLLBACK, {
        "source": CLIENT_RETRY, "replacement_history": list(exchange.history), "removed_count": len(rest),
        "kept_count": len(exchange.history),
        "reason": "the client retried its newest request: the retry's answer replaces the one recorded"}))
    return lines, None, pending


def _labels_of_answered(compaction_id: int, *, manual: bool) -> NewLine | None:
    """compactweb answered Claude Code's summary request, and wrote its Compaction then, as `auto`: neither the
    request (its prompt is the same for both) nor anything before it says whose it was. The request after it does,
    when it records Claude Code's /compact command (`manual`): the compaction was the user's, labelled as upstream
    mode labels one (trigger `manual`, reason `user_requested`, a standalone turn), with that evidence.

    Either way the labels are written into the rollout (a `compaction_labels` line naming the compaction's window,
    appended: the `compacted` line stays as written), so an export and re-import keeps them (the row alone would
    come back as the rollout's turns suggest: `auto`, before a turn)."""
    row = Compaction.objects.filter(pk=compaction_id).first()
    if row is None:
        return None
    if manual and row.trigger == "auto":
        row.trigger, row.reason, row.phase = "manual", "user_requested", "standalone_turn"
        row.inferred = {**(row.inferred or {}), "trigger": CLAUDE_COMPACT_SEEN}
        row.save(update_fields=["trigger", "reason", "phase", "inferred"])
    return labels_line(trigger=row.trigger, reason=row.reason, phase=row.phase, inferred=row.inferred,
                       window_id=row.window_id, window_number=row.window_number)


def _claude_compact_command(history: list[dict[str, Any]]) -> bool:
    """Whether Claude Code's history after a compaction records its /compact command (the user asked for it)."""
    return any(CLAUDE_COMPACT_COMMAND in message_text(i) for i in history
               if i.get("type") == "message" and i.get("role") == "user")


def is_claude_code(exchange: Exchange) -> bool:
    return exchange.meta.get("client") == "claude_code"


def _call_usage(pending: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, int]:
    """What Claude Code's summary requests of one compaction cost, summed (it may send two before the next
    conversation starts): the compaction's call tokens, in the shape of a `token_count`'s last usage."""
    before = (pending or {}).get("call_usage") or {}
    now = _codex_usage(usage or {})
    keys = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens")
    return {k: int(before.get(k) or 0) + int(now.get(k) or 0) for k in keys}


def _client_input(item: dict[str, Any]) -> bool:
    return item.get("role") in ("user", "developer") or str(item.get("type", "")).endswith("_output")


def phase_of(history: list[dict[str, Any]]) -> str:
    """Mid-turn when the compacted history ends in tool traffic or model output (the turn was under way), pre-turn
    when it ends in the user's message or is empty (spec §2.4)."""
    last = history[-1] if history else {}
    return "pre_turn" if not last or is_real_user_message(last) else "mid_turn"


def _last_turn_id(session: Session) -> str:
    payload = (RolloutLine.objects.filter(session=session, kind=p.TURN_CONTEXT).order_by("-seq")
               .values_list("payload", flat=True).first())
    return str((payload or {}).get("turn_id") or "")


def _codex_usage(usage: dict[str, Any]) -> dict[str, Any]:
    details = usage.get("input_tokens_details") or {}
    out_details = usage.get("output_tokens_details") or {}
    return {**usage, "cached_input_tokens": int(details.get("cached_tokens") or 0),
            "reasoning_output_tokens": int(out_details.get("reasoning_tokens") or 0)}
