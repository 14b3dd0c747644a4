"""Rendering helpers for the live pages: how a history item looks by kind, the token meter, token numbers.

Everything returned here is plain text (never marked safe): templates autoescape it, so transcript text always
renders as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django import template
from django.utils.formats import date_format
from django.utils.html import format_html

from compaction_app.engine import items as it
from compaction_app.engine.stuck import RECOVERIES, Stuck, stuck_state
from compaction_app.engine.vocabulary import code_label, method_label
from sessions_app.compactions.token_definitions import DEFINITIONS
from sessions_app.fleet.paging import fill
from sessions_app.fleet.triage import summary_finished
from sessions_app.live.token_chart import short_tokens

register = template.Library()

COLLAPSE_CHARS = 600
COLLAPSE_LINES = 12
PREVIEW_CHARS = 140


@dataclass(frozen=True)
class ItemView:
    kind: str  # a CSS modifier: user, assistant, developer, system, summary, context, call, output, reasoning, ...
    label: str
    text: str
    meta: str = ""
    collapse: bool = False
    preview: str = ""


def _preview(text: str) -> str:
    first = " ".join(text.split())
    return first if len(first) <= PREVIEW_CHARS else first[: PREVIEW_CHARS - 1] + "…"


def _long(text: str) -> bool:
    return len(text) > COLLAPSE_CHARS or text.count("\n") >= COLLAPSE_LINES


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(p.get("text", "") for p in output if isinstance(p, dict))
    if isinstance(output, dict):
        return str(output.get("content") or output.get("output") or json.dumps(output, ensure_ascii=False))
    return "" if output is None else str(output)


def _arguments(raw: Any) -> str:
    if isinstance(raw, str):
        try:
            return json.dumps(json.loads(raw), ensure_ascii=False, indent=1)
        except ValueError:
            return raw
    return json.dumps(raw, ensure_ascii=False, indent=1)


BOILERPLATE_KINDS = ("context", "developer", "system")


def _view(kind: str, label: str, text: str, meta: str = "", *, collapsible: bool = False) -> ItemView:
    # Injected context and developer instructions repeat in every window: fold them unless they are one line.
    boilerplate = kind in BOILERPLATE_KINDS and (len(text) > PREVIEW_CHARS or "\n" in text.strip())
    collapse = boilerplate or (collapsible and _long(text))
    return ItemView(kind=kind, label=label, text=text, meta=meta, collapse=collapse, preview=_preview(text))


@register.filter
def item_view(item: dict[str, Any]) -> ItemView:
    """How one Responses item renders: its kind (user, assistant, developer, tool call / output, reasoning, summary,
    opaque compaction item), a label, its text, and whether long text collapses into a <details>."""
    item = it.normalize_kind(item)
    kind = item.get("type")
    if kind == "message":
        role = item.get("role", "")
        text = it.message_text(item)
        if it.is_summary_message(item):
            return _view("summary", "Summary", text[len(it.SUMMARY_PREFIX) + 1 :], "from a compaction",
                         collapsible=True)
        if role == "user" and it.is_contextual_user_message(item):
            return _view("context", "Context", text, "injected", collapsible=True)
        labels = {"user": "User", "assistant": "Assistant", "developer": "Developer", "system": "System"}
        return _view(role if role in labels else "other", labels.get(role, role or "Message"), text,
                     collapsible=role != "user")
    if kind in ("function_call", "custom_tool_call"):
        args = _arguments(item.get("arguments") if kind == "function_call" else item.get("input", ""))
        return _view("call", "Tool call", args, f"{item.get('name', '?')} · {item.get('call_id', '')}",
                     collapsible=True)
    if kind == "local_shell_call":
        command = (item.get("action") or {}).get("command") or []
        return _view("call", "Shell call", " ".join(map(str, command)), item.get("call_id", ""), collapsible=True)
    if kind in it.TOOL_OUTPUT_KINDS:
        return _view("output", "Tool output", _output_text(item.get("output")), item.get("call_id", ""),
                     collapsible=True)
    if kind == "reasoning":
        parts = item.get("summary") or []
        text = "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))
        meta = "encrypted" if item.get("encrypted_content") else ""
        return _view("reasoning", "Reasoning", text or "(no readable summary)", meta, collapsible=True)
    if it.is_compaction_item(item):
        size = len(str(item.get("encrypted_content") or ""))
        return _view("compaction", "Compaction item", "Opaque: the server keeps what it summarised.",
                     f"{size:,} bytes encrypted")
    return _view("other", str(kind or "item"), json.dumps(item, ensure_ascii=False)[:2000], collapsible=True)


@dataclass(frozen=True)
class MeterView:
    tokens: int
    window: int
    limit: int | None
    pct: float
    limit_pct: float | None
    level: str  # ok / warm / hot / over: headroom before the auto-compact limit
    headroom: int | None


@register.filter
def meter_view(summary: dict[str, Any]) -> MeterView:
    """Tokens in the window against the context window, the auto-compact limit marked, coloured by headroom."""
    tokens = int(summary.get("tokens_in_window") or 0)
    window = max(int(summary.get("context_window") or 1), 1)
    limit = summary.get("auto_compact_limit")
    pct = min(100.0, round(100 * tokens / window, 1))
    limit_pct = min(100.0, round(100 * limit / window, 1)) if limit else None
    ratio = tokens / limit if limit else tokens / window
    level = "over" if ratio >= 1 else "hot" if ratio >= 0.85 else "warm" if ratio >= 0.6 else "ok"
    return MeterView(tokens=tokens, window=window, limit=limit, pct=pct, limit_pct=limit_pct, level=level,
                     headroom=(limit - tokens) if limit else None)


@register.filter
def fleet_fill(summary: dict[str, Any]) -> str:
    """The row's rank under the fleet's default sort (sessions_app.fleet.paging.fill), for the browser to parse."""
    return f"{fill(summary):.6f}"


@register.filter
def finished(summary: Any) -> bool:
    """Whether nothing drives the session any more (sessions_app.fleet.triage): the board ranks it last."""
    return isinstance(summary, dict) and summary_finished(summary)


@register.filter
def tokens(value: Any) -> str:
    """A token count with thousands separators (12,345)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "–"


@register.filter
def short(value: Any) -> str:
    """A token count in short form (12.3k)."""
    try:
        return short_tokens(int(value))
    except (TypeError, ValueError):
        return "–"


@register.simple_tag
def definition(name: str) -> str:
    """What a token figure means, in the words every page uses (sessions_app.compactions.token_definitions)."""
    return DEFINITIONS[name]


@register.filter
def label(value: Any) -> str:
    """A code as words, from the one label vocabulary (compaction_app.engine.vocabulary.code_label: pre_turn ->
    pre-turn, remote_v2 -> remote compaction v2, job.running -> started); unknown codes with spaces for `_`."""
    return code_label(str(value or ""))


@register.filter
def when(moment: Any) -> str:
    """A date and time as every page writes it: the one DATETIME_FORMAT (compactweb/formats: UTC, to the second),
    in a <time> element."""
    if not moment:
        return ""
    utc = moment.astimezone(UTC)
    return format_html('<time datetime="{}">{}</time>', utc.isoformat(), date_format(utc, "DATETIME_FORMAT"))


@register.filter
def method(value: Any) -> str:
    """A compaction method in plain words: `responses` and `local` -> 'local summarisation'."""
    return method_label(str(value or "")) or label(value)


@register.filter
def not_reducing(attempt: Any) -> bool:
    """Whether a finished compaction left the window at least as full as before (flagged, not a plain success)."""
    def field(name: str):
        return attempt.get(name) if isinstance(attempt, dict) else getattr(attempt, name, None)

    before, after = field("tokens_before"), field("tokens_after")
    return before is not None and after is not None and int(after) >= int(before)


@register.filter
def stuck(attempt: Any, summary: Any = None) -> Stuck | None:
    """Whether a session cannot go on, why, and its recoveries (compaction_app.engine.stuck), from its newest
    compaction attempt and its live numbers (`attempt|stuck:s`); None when it can go on."""
    return stuck_state(attempt if isinstance(attempt, dict) else None, summary if isinstance(summary, dict) else None)


@register.filter
def recovery_title(method: Any) -> str:
    """What a one-click recovery does, in words (compaction_app.engine.stuck.RECOVERIES)."""
    return RECOVERIES.get(str(method), "")


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """mapping[key], or None (dict lookups by a variable key in templates)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def ago(moment: Any) -> str:
    """'just now', '4 min ago', '2 h ago', '3 d ago', in a <time> element carrying its age in seconds: live.js
    moves the words on as the page stays open (an age is a live counter, issue 47), counting from when the page
    got it, so a browser clock that differs from the server's changes nothing."""
    from django.utils import timezone

    if not moment:
        return ""
    seconds = max((timezone.now() - moment).total_seconds(), 0)
    return format_html('<time datetime="{}" data-age="{}">{}</time>', moment.astimezone(UTC).isoformat(),
                       int(seconds), age_words(seconds))


def age_words(seconds: float) -> str:
    """An age in words; static/js/live.js (ageWords) says the same."""
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"
