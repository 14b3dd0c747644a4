"""Pages for repairing and bringing in sessions: the audit log (support), rollback / redo forms for the
compaction inspector (support), the rollout import upload and the replay comparison (operator). Thin: parse,
check the role, call sessions_app.compactions.rollback / sessions_app.transfer.services, render."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from compaction_app.models import AuditEntry, Compaction, CompactionPolicy, Provider
from compactweb.roles import OPERATOR, SUPPORT, role_required
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.compactions import rollback
from sessions_app.models import Session
from sessions_app.rollout.lease import SessionBusy
from sessions_app.transfer import services as transfer
from sessions_app.web.forms import AuditFilterForm, ImportRolloutForm, ReasonForm, ReplayForm
from sessions_app.web.shortcuts import safe_next

AUDIT_PAGE_SIZE = 50


def _context(request, nav: str, **extra):
    return {"nav": nav, **extra}


# --- audit log -----------------------------------------------------------------------------------------------------


@role_required(SUPPORT)
def audit_log(request):
    """Every compaction, rollback, redo, thread rollback, import, replay and configuration change: who, when, why."""
    entries = AuditEntry.objects.select_related("actor", "session", "compaction")
    filters = AuditFilterForm(request.GET).filters()
    action, session_id = filters["action"], filters["session"]
    if action:
        entries = entries.filter(action=action)
    if session_id is not None:
        entries = entries.filter(session_id=session_id)
    page = Paginator(entries, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = "&".join(f"{k}={v}" for k, v in (("action", action), ("session", session_id)) if v not in ("", None))
    return render(request, "sessions_app/audit_log.html", _context(
        request, "audit", page=page, actions=AuditEntry.Action.choices, action=action, session_id=session_id,
        query=query,
    ))


# --- rollback / redo forms (the compaction inspector's buttons post here) ------------------------------------------


def _after_rollback(request, compaction: Compaction) -> str:
    return safe_next(request, reverse("compaction_detail", args=[compaction.pk]))


def _reason(request) -> str:
    form = ReasonForm(request.POST)
    return form.cleaned_data["reason"] if form.is_valid() else ""


@role_required(SUPPORT)
@require_http_methods(["GET", "POST"])
def compaction_rollback(request, pk: int):
    """GET: confirm, showing the later compactions the rollback also undoes. POST: roll back, with a reason."""
    compaction = get_object_or_404(Compaction.objects.select_related("session"), pk=pk)
    if request.method == "GET":
        return render(request, "sessions_app/rollback_confirm.html", _context(
            request, "fleet", compaction=compaction, preview=rollback.rollback_preview(compaction),
            next=safe_next(request, ""),
        ))
    reason = _reason(request)
    try:
        result = rollback.do_rollback_compaction(compaction_id=compaction.pk, actor=request.user, reason=reason)
    except (SessionBusy, rollback.RollbackRefused) as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(_after_rollback(request, compaction))
    undone = ", ".join(f"#{c.pk}" for c in result.undoes)
    messages.success(request, f"Compaction #{compaction.pk} rolled back (rollout line {result.line.seq})"
                     + (f"; also undid compactions {undone}." if undone else "."))
    return HttpResponseRedirect(_after_rollback(request, compaction))


@role_required(SUPPORT)
@require_POST
def compaction_redo(request, pk: int):
    compaction = get_object_or_404(Compaction.objects.select_related("session"), pk=pk)
    reason = _reason(request)
    try:
        result = rollback.do_redo_compaction(compaction_id=compaction.pk, actor=request.user, reason=reason)
    except (SessionBusy, rollback.RollbackRefused) as exc:
        if request.htmx:  # the inspector's Redo button: the reason shows beside it
            return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8",
                                headers={"HX-Reswap": "none"})
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Compaction #{compaction.pk} redone (rollout line {result.line.seq}).")
        if request.htmx:
            return HttpResponse(status=204, headers={"HX-Redirect": _after_rollback(request, compaction)})
    return HttpResponseRedirect(_after_rollback(request, compaction))


# --- import --------------------------------------------------------------------------------------------------------


@role_required(OPERATOR)
@require_http_methods(["GET", "POST"])
def import_rollout(request):
    """Upload a Codex rollout .jsonl file; a bad file is refused whole with its bad lines listed."""
    context = _context(
        request, "import", providers=Provider.objects.order_by("name"), policies=CompactionPolicy.objects.order_by("name"),
        errors=None, result=None, form=request.POST,
    )
    if request.method == "GET":
        return render(request, "sessions_app/import.html", context)
    form = ImportRolloutForm(request.POST, request.FILES)
    if not form.is_valid():
        first = next(iter(form.errors.values()))[0]
        context["errors"] = {"message": first, "lines": []}
        return render(request, "sessions_app/import.html", context, status=400)
    data = form.cleaned_data
    upload = data["file"]
    try:
        result = transfer.do_import_rollout(
            lines=upload.read().splitlines(keepends=True), source_name=upload.name or "upload",
            title=data["title"] or None, provider=data["provider"], policy=data["policy"],
            new_thread_id=data["new_thread_id"], actor=request.user, strict=data["strict"],
        )
    except RolloutImportError as exc:
        context["errors"] = {"message": str(exc), "lines": exc.errors[:50], "more": max(0, len(exc.errors) - 50)}
        return render(request, "sessions_app/import.html", context, status=400)
    except transfer.TransferRefused as exc:
        context["errors"] = {"message": str(exc), "lines": [],
                             "session": getattr(exc, "session_id", None)}
        return render(request, "sessions_app/import.html", context, status=exc.status)
    skipped = f"; {result.skipped_count} line(s) of unknown kinds skipped" if result.skipped_count else ""
    if result.problems:
        first = result.problems[0]
        skipped += (f"; {result.skipped_lines} line(s) skipped and {result.repaired_lines} repaired "
                    f"(first: line {first.line_no}, {first.reason})")
    messages.success(request, f"Imported {upload.name} as session #{result.session.pk}: {result.lines_imported} "
                     f"rollout lines, {result.compactions} compaction(s){skipped}.")
    return HttpResponseRedirect(reverse("session_detail", args=[result.session.pk]))


# --- replay and comparison -----------------------------------------------------------------------------------------


@role_required(OPERATOR)
@require_http_methods(["GET", "POST"])
def replay_compare(request, pk: int):
    """A session's replays under other policies next to it (or, for a replay, next to its original), and a form to
    start another replay."""
    session = get_object_or_404(Session.objects.select_related("provider", "policy", "origin"), pk=pk)
    if request.method == "POST":
        form = ReplayForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Choose the policy to replay under.")
            return HttpResponseRedirect(reverse("replay_compare", args=[session.pk]))
        policy, provider = form.cleaned_data["policy"], form.cleaned_data["provider"]
        result = transfer.do_replay_session(session_id=session.pk, policy=policy, provider=provider,
                                            actor=request.user)
        failed = f"; {len(result.failures)} compaction(s) failed" if result.failures else ""
        messages.success(request, f"Replayed as session #{result.replay.pk}: {result.turns} turns, "
                         f"{result.compactions} compaction(s){failed}.")
        return HttpResponseRedirect(reverse("replay_compare", args=[result.replay.pk]))
    comparisons = []
    if session.origin_id is not None:
        comparisons.append(transfer.replay_comparison(replay=session))
    for replay in session.replays.select_related("provider", "policy").order_by("-pk")[:20]:
        comparisons.append(transfer.replay_comparison(replay=replay))
    return render(request, "sessions_app/replay_compare.html", _context(
        request, "fleet", session=session, comparisons=comparisons,
        policies=CompactionPolicy.objects.order_by("name"), providers=Provider.objects.order_by("name"),
        session_url=reverse("session_detail", args=[session.pk]),
    ))
