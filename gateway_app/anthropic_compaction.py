"""compactweb mode for Claude Code (issue 44): the gateway answers Claude Code's summary request with the route
policy's compaction.

Claude Code compacts by asking the model for a summary of the conversation and continuing from that text alone
(it writes it after a compact boundary and sends it, in its own framing, as the first message of every later
request). So, on a `compactweb` route, its summary request is not forwarded: the gateway records the history it
carries, runs the route policy's compaction on the session through the same service as every compactweb
compaction (the admin's summarisation prompt, pins, retention probes, hooks, attempts, atomic install; masking
that has nothing left to mask falls back to local summarisation, as for Codex), and answers, as a Messages API
answer (SSE or JSON, as asked), with the policy's summary in the `<summary>` block Claude Code's prompt asks for
(`summary_of`; the pinned block in force is not in it: the gateway adds it to every later request). Claude
Code's next conversation starts from that text.

Claude Code's next request then carries the summary in Claude Code's own framing ("This session is being
continued from a previous conversation ..."), not the policy's items: the recorder installs that history with a
`rollback` line of source `claude_code_summary` (the compaction is already recorded, so no second Compaction),
and from there on the history grows by extension and is what the upstream received.

A compaction the policy cannot run is answered 400 (Claude Code shows the message), one a retry may cure (the model
or the database failed) 500 `api_error` with a fixed message, never the exception's text (that is in the session's
attempt and the log); either way the history is as the request had it.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from compaction_app.engine.items import message_text
from compaction_app.engine.pins import is_pinned_block
from compaction_app.providers.simulated import anthropic as messages
from gateway_app import compaction, lookups, operator, proxy, recording
from gateway_app.models import GatewaySession
from sessions_app.gateway_surface import CompactionFailed, CompactionRefused

logger = logging.getLogger(__name__)

PENDING_KIND = recording.CLAUDE_COMPACTWEB
# What Claude Code is told when compactweb's own compaction failed (docs/claude-code.md): no exception text; the
# Responses gateway tells Codex the same.
INTERNAL_FAILURE = proxy.INTERNAL_COMPACTION_FAILURE


class Refusal(Exception):
    """The compaction could not be answered: (status, message) for Claude Code, in Anthropic's error shape."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def summary_of(history: list[dict[str, Any]], summary: str) -> str:
    """The text Claude Code continues from, in the `<summary>` block its prompt asks for: the policy's summary.
    Claude Code's own compaction continues from a summary alone, so the user messages a Codex replacement keeps
    beside it are not repeated (the policy's summary carries the user's requests); a strategy that writes no
    summary (masking) gives the whole history it left, as text. The pinned blocks are not in it: the gateway puts
    the block in force into every later request of the session (`steering.with_pins`, the policy reinjects pins:
    only then does the history hold them), so inside Claude Code's summary too it would reach the upstream twice."""
    parts = [summary.strip()] if summary.strip() else [_as_text(i) for i in history if not is_pinned_block(i)]
    return "<summary>\n" + "\n\n".join(p for p in parts if p) + "\n</summary>"


def _as_text(item: dict[str, Any]) -> str:
    if item.get("type") == "message":
        return message_text(item).strip()
    if item.get("type") == "function_call":
        return f"[tool call {item.get('name', '')}({item.get('arguments', '')})]"
    if item.get("type") == "function_call_output":
        output = item.get("output")
        return f"[tool output: {output if isinstance(output, str) else json.dumps(output)}]"
    return ""


def _set_pending(*, gs_id: int, compaction_id: int) -> None:
    GatewaySession.objects.filter(pk=gs_id).update(pending_compaction={"kind": PENDING_KIND,
                                                                       "compaction_id": compaction_id})


async def answer(caller: proxy.Caller, exchange: dict[str, Any], body: dict[str, Any], send) -> None:
    """Answer a summary request with the policy's compaction; Refusal (nothing sent yet) when it cannot."""
    ex = recording.Exchange(**exchange, status=200)
    try:
        gs = await proxy.on_recorder(compaction.record_history, exchange=ex)
        done = await compaction.run_policy_compaction(gs=gs, history=ex.history, fallback=caller.compaction_fallback,
                                                      room_target=False)
        text = summary_of(await lookups.run(recording.live_history, session_id=gs.session_id), done.summary or "")
        await proxy.on_recorder(_set_pending, gs_id=gs.pk, compaction_id=done.pk)
        # The recorded history is now the compaction's: a control cached before it would place the pinned block by
        # the old history's positions in Claude Code's next (compacted) conversation, wherever they happen to fall.
        operator.forget_controls()
    except compaction.ForwardInstead:  # the route says: forward what the policy cannot do (masking, nothing left)
        raise
    except Exception as exc:  # the history is as the request had it
        if isinstance(exc, CompactionRefused) or (isinstance(exc, CompactionFailed)
                                                  and exc.kind in proxy.UNRECOVERABLE):
            status = 400
            message = (f"compactweb gateway: route {caller.route_name}'s policy cannot compact this session "
                       f"({exc}); start a new session, or ask an operator to change the route's policy")
            error = message
        else:
            # A failure of compactweb's own (the model, the database): a 500 `api_error`, which Claude Code
            # retries, saying only that; what failed is for the operator (the attempt and the log), not for the
            # client: an exception's text can carry a query, a host name or an upstream's answer.
            status, message = 500, INTERNAL_FAILURE
            error = f"compactweb gateway could not compact this session: {exc}"
        logger.info("gateway: compactweb compaction for Claude Code on route %s: %s", caller.route_name, error)
        await proxy.schedule_record(recording.Exchange(**exchange, status=status, error=error))
        raise Refusal(status, message) from exc
    usage = messages.usage(int(done.tokens_before or 0), max(1, len(text) // 4), 0)
    answer_ = messages.message("msg_cw_" + secrets.token_hex(12), str(body.get("model") or caller.config.model),
                               [{"type": "text", "text": text}], usage)
    if body.get("stream"):
        data = b"".join(messages.stream_events(answer_, lambda t: [t]))
        content_type = b"text/event-stream"
    else:
        data, content_type = json.dumps(answer_).encode(), b"application/json"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data, "more_body": False})
