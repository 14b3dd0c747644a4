"""The operator's controls where the operator is: fault injection on the session page, and one-click recovery of a
stuck session on the fleet board and the session page. Thin: parse a Django form, check the role, call a service, answer with the
fragment that changed (htmx) or redirect with a message (no JavaScript). A refusal answers with its reason."""

from __future__ import annotations

import time

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from compaction_app.engine.stuck import RECOVERIES
from compactweb.api_errors import status_for
from compactweb.roles import OPERATOR, role_required
from sessions_app.compactions.queue import CompactionRequestRefused
from sessions_app.fleet.faults import (
    FaultInjectionError,
    do_set_session_faults,
    fault_lines,
    fault_panel,
    faults_apply,
    recovery_warning,
)
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.live import render as live_render
from sessions_app.models import Session
from sessions_app.web.operator_forms import FaultInjectionForm, RecoverForm
from sessions_app.web.shortcuts import safe_next

FAULTS_PARTIAL = "sessions_app/session_detail.html#fault_form"
NO_FAULTS_HERE = ("No fault set: this session sends no request to the simulated model (a followed file, a gateway "
                  "session or a real provider), so a fault would never fire.")


def refusal(message: str, *, status: int = 409) -> HttpResponse:
    """A refused htmx action: its reason as plain text, shown where the user clicked (static/js/live.js)."""
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8",
                        headers={"HX-Reswap": "none"})


@require_POST
@role_required(OPERATOR)
def session_faults(request, pk: int):
    """Switch a simulated-model fault on (or off) for this session's next requests."""
    session = get_object_or_404(Session, pk=pk)
    if not faults_apply(session=session):  # the page offers no panel for it: a form from before, or a hand-made post
        if request.htmx:
            return refusal(NO_FAULTS_HERE)
        messages.error(request, NO_FAULTS_HERE)
        return redirect("session_detail", pk=session.pk)
    form = FaultInjectionForm(request.POST)
    notice = error = None
    if form.is_valid():
        spec = form.spec(key=f"s{session.pk}op{int(time.time())}")
        try:
            session = do_set_session_faults(session_id=session.pk, fault=spec, actor=request.user)
        except FaultInjectionError as exc:
            error = str(exc)
        else:
            notice = "Fault on: what it does is listed above." if spec else "Faults cleared."
    else:
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)
    if request.htmx:
        context = {"s": {"id": session.pk}, "faults": fault_panel(session=session), "fault_form": form,
                   "fault_notice": notice, "fault_error": error}
        return render(request, FAULTS_PARTIAL, context, status=400 if error else 200)
    (messages.error if error else messages.success)(request, error or notice)
    return redirect("session_detail", pk=session.pk)


@require_POST
@role_required(OPERATOR)
def recover_session(request, pk: int):
    """One-click recovery of a stuck session: a manual compaction by local summarisation (which trims the oldest
    items until the prompt fits) or a new window; queued behind a running step like any manual compaction. The
    answer is what changed where the user clicked: the fleet row, or the session page's compaction status."""
    session = get_object_or_404(Session, pk=pk)
    form = RecoverForm(request.POST)
    back = safe_next(request, reverse("fleet"))
    if not form.is_valid():
        message = f"Choose a recovery: {', '.join(RECOVERIES)}."
        if request.htmx:
            return refusal(message, status=400)
        messages.error(request, message)
        return redirect(back)
    method = form.cleaned_data["method"]
    try:
        job = do_request_compaction(session_id=session.pk, actor=request.user, strategy=method)
    except CompactionRequestRefused as exc:
        if request.htmx:
            return refusal(str(exc), status=status_for(exc))
        messages.error(request, str(exc))
        return redirect(back)
    notice = f"Recovery {'queued' if job.params['behind'] else 'started'}: {RECOVERIES[method].lower()}."
    warning = recovery_warning(lines=fault_lines(session_id=session.pk, fault_injection=session.fault_injection),
                               method=method)
    if warning:
        notice = f"{notice} {warning}"
    if request.htmx and request.htmx.target == "compaction-status":
        return HttpResponse(live_render.compaction_status(session_id=session.pk, notice=notice))
    if request.htmx:
        return HttpResponse(live_render.fleet_row(session_id=session.pk, notice=notice))
    messages.success(request, notice)
    return redirect(back)
