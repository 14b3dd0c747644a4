"""Rollback and redo of a compaction (support): the compaction inspector's buttons post here. Thin: parse the
reason, check the role, call sessions_app.compactions.rollback, redirect back with a message."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from compaction_app.models import Compaction
from compactweb.roles import SUPPORT, role_required
from sessions_app.compactions import rollback
from sessions_app.rollout.lease import SessionBusy
from sessions_app.web.forms import ReasonForm
from sessions_app.web.shortcuts import safe_next


def _after_rollback(request, compaction: Compaction) -> str:
    return safe_next(request, reverse("compaction_detail", args=[compaction.pk]))


def _reason(request) -> str:
    form = ReasonForm(request.POST)
    return form.cleaned_data["reason"] if form.is_valid() else ""


@role_required(SUPPORT)
@require_http_methods(["GET", "POST"])
def compaction_rollback(request, pk: int):
    """GET: confirm, showing the later compactions the rollback also undoes. POST: roll back, with a reason; a
    refusal is shown in the form (with htmx the form partial alone, without it the whole page)."""
    compaction = get_object_or_404(Compaction.objects.select_related("session"), pk=pk)
    context = dict(nav="fleet", compaction=compaction, next=safe_next(request, ""))
    if request.method == "GET":
        return render(request, "sessions_app/rollback_confirm.html",
                      {**context, "preview": rollback.rollback_preview(compaction)})
    reason = _reason(request)
    try:
        # the later compactions the form showed: one that landed since is refused with the new list, not undone
        shown = [int(v) for v in request.POST.getlist("expect_undoes") if v.isdigit()]
        result = rollback.do_rollback_compaction(compaction_id=compaction.pk, actor=request.user, reason=reason,
                                                 expect_undoes=shown)
    except (SessionBusy, rollback.RollbackRefused) as exc:
        context.update(preview=rollback.rollback_preview(compaction), reason=reason, error=str(exc))
        if request.htmx:
            return render(request, "sessions_app/rollback_confirm.html#rollback_form", context, status=409)
        return render(request, "sessions_app/rollback_confirm.html", context, status=409)
    undone = ", ".join(f"#{c.pk}" for c in result.undoes)
    messages.success(request, f"Compaction #{compaction.pk} rolled back (rollout line {result.line.seq})"
                     + (f"; also undid compactions {undone}." if undone else "."))
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Redirect": _after_rollback(request, compaction)})
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
