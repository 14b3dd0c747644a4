"""Template filters for retention scores: a 0..1 score as a percentage and a level for its colour."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()

CATEGORY_LABELS = {"recall": "Recall", "artifact_trail": "Artifact trail", "continuation": "Continuation",
                   "decision": "Decision"}


@register.filter
def pct(score: Any) -> str:
    """0.8333 → "83%"; None → "–" (nothing left the window, so nothing to score)."""
    if score is None or score == "":
        return "–"
    return f"{round(float(score) * 100)}%"


@register.filter
def score_level(score: Any) -> str:
    if score is None or score == "":
        return "none"
    value = float(score)
    return "good" if value >= 0.8 else "fair" if value >= 0.5 else "poor"


@register.filter
def category_label(name: str) -> str:
    return CATEGORY_LABELS.get(name, name)


@register.filter
def forgotten(retention: dict | None) -> list[dict]:
    """The facts not kept, each text once: the same words found as two kinds of fact (a file both read and
    changed, a command as a call and as its outcome) are one thing forgotten to the reader (issue 47 item 9: the
    inspector listed one twice)."""
    seen: set[str] = set()
    lost = []
    for fact in (retention or {}).get("facts", []):
        key = " ".join(str(fact.get("text", "")).split()).casefold()
        if not fact.get("kept") and key not in seen:
            seen.add(key)
            lost.append(fact)
    return lost
