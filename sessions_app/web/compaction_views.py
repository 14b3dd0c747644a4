"""Pages: the compaction inspector (before and after side by side, attempts, hook runs) and the analytics page.

Thin: check the role, read through sessions_app.compactions (presentation, analytics), shape rows for the templates.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from compaction_app.models import Compaction, CompactionPolicy, Provider, RetentionSettings
from compactweb.roles import ADMIN, OPERATOR, SUPPORT, has_role, role_required
from sessions_app.compactions import presentation, retention, rolled_up, selectors
from sessions_app.compactions.analytics import compaction_analytics
from sessions_app.transfer import codex_sources
from sessions_app.web.api.compaction_serializers import CompactionDetailSerializer
from sessions_app.web.forms import DIMENSIONS, PERIODS, AnalyticsFilterForm

# The one rule of the analytics page's freed figures (sessions_app.compactions.analytics.compactions_freed), said on
# the page beside them.
FREED_RULE = ("Tokens freed count the compactions installed and not rolled back (a rollback gives its tokens "
              "back), imported ones included: the compactions \"Retention and cost\" counts, so without a policy or "
              "provider chosen the figure is the sum of its By day rows.")
ROLLBACK_URL_NAME = "compaction_rollback"  # the support-only confirmation form (sessions_app.compactions.rollback)
RETENTION_DIMENSIONS = (("strategy", "method"), ("policy", "policy"), ("model", "model"), ("day", "day"))
# `method` is compactweb's choice of method; `strategy` is Codex's analytics field (`memento`, spec §10).
DIMENSION_LABELS = {d: d for d in DIMENSIONS} | {"method": "method (compactweb)",
                                                 "strategy": "Codex strategy (analytics)"}


def _rollback_url(request, compaction: Compaction) -> str | None:
    """The rollback form's URL for support users; None for operators and for a compaction already rolled back."""
    if compaction.rolled_back or not has_role(request.user, SUPPORT):
        return None
    return reverse(ROLLBACK_URL_NAME, args=[compaction.pk])


def _redo_url(request, compaction: Compaction) -> str | None:
    """The redo form's URL for support users when the compaction is rolled back, else None."""
    if not compaction.rolled_back or not has_role(request.user, SUPPORT):
        return None
    return reverse("compaction_redo", args=[compaction.pk])


def _marked(items: list, counts: list, marks: dict[int, str]) -> list[dict[str, Any]]:
    return [
        {"item": item, "tokens": tokens, "seq": None, "mark": marks.get(i, "")}
        for i, (item, tokens) in enumerate(zip(items, counts, strict=False))
    ]


@require_GET
@role_required(OPERATOR)
def compaction_detail(request, pk: int):
    compaction = get_object_or_404(Compaction.objects.select_related("session"), pk=pk)
    detail = CompactionDetailSerializer(presentation.compaction_detail(compaction=compaction)).data  # the API's shape
    change = detail["window_change"]
    before_marks = {k["before_index"]: "kept" for k in change["kept"]} | {
        k["before_index"]: "left" for k in change["left"]
    }
    after_marks = {k["after_index"]: "kept" for k in change["kept"]} | {k["after_index"]: "new" for k in change["new"]}
    before_total = sum(detail["before_tokens"])
    context = {
        "nav": "fleet",
        "c": detail,
        "compaction": compaction,
        "session": compaction.session,
        "before": _marked(detail["before_history"], detail["before_tokens"], before_marks),
        "after": _marked(detail["replacement_history"], detail["replacement_tokens"], after_marks),
        "before_total": before_total,
        "after_total": sum(detail["replacement_tokens"]),
        "freed_pct": round(100 * detail["tokens_freed"] / detail["tokens_before"]) if detail["tokens_before"] else 0,
        "left": [{"item": k["item"], "tokens": k["tokens"], "seq": None, "mark": "left"} for k in change["left"]],
        # A Claude Code compaction is told in Claude Code's words (auto-compact, /compact, its own summary request),
        # not in Codex's (phase, implementation, Codex's analytics strategy, initial-context injection).
        "claude": codex_sources.is_claude_session(session=compaction.session),
        "rollback_url": _rollback_url(request, compaction),
        "redo_url": _redo_url(request, compaction),
        **_prompt_links(request, compaction),
    }
    return render(request, "compaction_app/compaction_detail.html", context)


def _prompt_links(request, compaction: Compaction) -> dict[str, Any]:
    """The prompt a compaction was made with, as the inspector offers it: its text when still configured, and for
    admins the admin page holding it (the stored prompt, or the policy whose compact_prompt it is)."""
    source = selectors.prompt_source(compaction=compaction)
    url = None
    if source is not None and has_role(request.user, ADMIN):
        if source.prompt_id is not None:
            url = reverse("admin:compaction_app_prompt_change", args=[source.prompt_id])
        elif source.policy_id is not None:
            url = reverse("admin:compaction_app_compactionpolicy_change", args=[source.policy_id])
    return {"prompt_source": source, "prompt_url": url}


STATUS_COLOURS = {"running": 0, "completed": 1, "failed": 4, "interrupted": 6}  # indexes of the CSS palette


def colour_index(dimension: str, value: str, position: int) -> int:
    """Statuses keep their meaning (completed green, failed red); other values take the palette in order."""
    if dimension == "status" and value in STATUS_COLOURS:
        return STATUS_COLOURS[value]
    return position % 8


def _bars(per_day: dict[str, dict[str, dict[str, int]]], dimension: str) -> tuple[list[dict], list[str]]:
    """One row per day with each value's share of the busiest day, for stacked bars."""
    values = sorted({v for day in per_day.values() for v in day.get(dimension, {})})
    peak = max((sum(day.get(dimension, {}).values()) for day in per_day.values()), default=0) or 1
    rows = []
    for date, day in per_day.items():
        counts = day.get(dimension, {})
        total = sum(counts.values())
        rows.append({
            "date": date,
            "total": total,
            "segments": [
                {"value": v, "index": colour_index(dimension, v, i), "count": counts[v], "pct": round(100 * counts[v] / peak, 2)}
                for i, v in enumerate(values)
                if counts.get(v)
            ],
        })
    return rows, values


@require_GET
@role_required(OPERATOR)
def analytics(request):
    chosen = AnalyticsFilterForm(request.GET).filters()
    policy_id, provider_id, period, dimension = (
        chosen["policy_id"], chosen["provider_id"], chosen["period"], chosen["dimension"])
    since = timezone.now() - timedelta(days=int(period)) if period else None
    data = compaction_analytics(policy_id=policy_id, provider_id=provider_id, since=since)
    days, values = _bars(data["per_day"], dimension)
    totals = {
        d: sorted(data["totals"].get(d, {}).items(), key=lambda kv: (-kv[1], kv[0])) for d in DIMENSIONS
    }
    context = {
        "nav": "analytics",
        "a": data,
        "totals": totals,
        "totals_max": {d: max((n for _, n in totals[d]), default=1) for d in DIMENSIONS},
        "days": days,
        "legend": [{"index": colour_index(dimension, v, i), "value": v} for i, v in enumerate(values)],
        "dimension": dimension,
        "dimensions": DIMENSIONS,
        "dimension_labels": DIMENSION_LABELS,
        "periods": PERIODS,
        "period": period,
        "policies": CompactionPolicy.objects.order_by("name"),
        "providers": Provider.objects.order_by("name"),
        "policy_id": policy_id,
        "provider_id": provider_id,
        "failure_pct": None if data["failure_rate"] is None else round(100 * data["failure_rate"], 1),
        "as_of": timezone.now(),
        "archived_sessions": None if period else rolled_up.archived_sessions(),
        "archive_after_days": RetentionSettings.current().archive_after_days,
        "freed_rule": FREED_RULE,
    }
    context["retention_tables"] = [
        (label, retention.retention_rollup(by=by, since=since)) for by, label in RETENTION_DIMENSIONS
    ]
    return render(request, "compaction_app/analytics.html", context)
