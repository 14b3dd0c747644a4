"""A summary's structure read as plain claims (issue 46, round eight; docs/retention.md, "round eight").

Summaries come as bullets, prose, JSON lines, YAML items, markdown tables: the same claim "checkout 50 load: >= 370
req/s" may be one JSON object (`{"topic": "checkout 50 load", "value": ">= 370 req/s"}`), a YAML item whose topic
and value sit on two lines, a table row (`| 3 | checkout 50 load | >= 370 req/s |`) or an outline's heading with a
bullet under it. Each is flattened to one
"subject: value" line, read as a claim of its own beside the lines it came from, so that a fact is matched the same
way whatever structure the summary used. Pure functions, no Django.
"""

from __future__ import annotations

import json
import re

# A YAML or outline item's field: `- topic: checkout 50 load`, `  value: ">= 370 req/s"`.
_FIELD = re.compile(r"^(?P<indent>\s*)(?P<dash>[-*•]\s+)?(?P<key>[\w .-]{1,24}?)\s*:\s+(?P<value>\S.*)$")
# A markdown table's rule line (`|---|---:|`).
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|[\s:|-]*$")
_INDEX = re.compile(r"^\d{1,3}\.?$")


def _unquote(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'" else value


def _json_claim(line: str) -> str | None:
    """A JSON object on one line, its values in order: the first names the claim, the rest state it."""
    text = line.strip().rstrip(",")
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    values = [str(v) for v in data.values() if isinstance(v, str | int | float) and str(v).strip()]
    return f"{values[0]}: {', '.join(values[1:])}" if len(values) > 1 else None


def _row_claim(line: str) -> str | None:
    """A markdown table row, its cells in order (a leading row number left out): "subject: rest"."""
    if line.count("|") < 2 or _TABLE_RULE.match(line):
        return None
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    cells = [c for c in cells if c]
    if cells and _INDEX.match(cells[0]):
        cells = cells[1:]
    return f"{cells[0]}: {' '.join(cells[1:])}" if len(cells) > 1 else None


def _item_claims(lines: list[str]) -> list[str]:
    """YAML or outline items whose fields sit on lines of their own (`- topic: X` then `  value: Y`): each item's
    field values joined, the first naming it."""
    found: list[str] = []
    item: list[str] = []
    for line in [*lines, ""]:
        match = _FIELD.match(line)
        if match is not None and match.group("dash") is None and item:
            item.append(_unquote(match.group("value")))
            continue
        if len(item) > 1:
            found.append(f"{item[0]}: {', '.join(item[1:])}")
        item = [_unquote(match.group("value"))] if match is not None and match.group("dash") else []
    return found


_MARKER = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _outline_claims(lines: list[str]) -> list[str]:
    """An outline's heading with one bullet indented under it (`1. tenant 20 deadline` then `   - 12 September
    2027`): the heading names the claim, its bullet states it."""
    found = []
    for i, line in enumerate(lines):
        children = []
        for child in lines[i + 1:]:
            if _indent(child) <= _indent(line) or not _MARKER.match(child):
                break
            children.append(_MARKER.sub("", child).strip())
        if len(children) == 1:  # several bullets under a heading are a section's several claims, not one
            found.append(f"{_MARKER.sub('', line).strip().rstrip(':')}: {', '.join(children)}")
    return found


def flat_claims(lines: list[str]) -> list[str]:
    """The claims a summary's structured lines make, each as one "subject: value" line (JSON objects, table rows,
    YAML items); plain lines give none (they are claims already)."""
    found = [claim for line in lines for claim in (_json_claim(line) or _row_claim(line),) if claim]
    return found + _item_claims(lines) + _outline_claims(lines)
