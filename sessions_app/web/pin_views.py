"""Pages: pin (support role: a pin becomes developer text, sessions_app.web.instructing) and unpin (operator role)
context from the session page. Thin: a Django Form, the retention service, the pins card re-rendered with the
outcome in it (htmx), or the session page (no JavaScript)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from compaction_app.engine.pins import MAX_PIN_CHARS, PinBudgetExceeded, PinKind
from compactweb.roles import OPERATOR, role_required
from sessions_app.compactions import retention
from sessions_app.models import Session
from sessions_app.web.instructing import PIN_PATH, may_instruct, refusal
from sessions_app.web.pages import session_page


class PinForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k.value, k.value) for k in PinKind], initial=PinKind.CONSTRAINT.value)
    text = forms.CharField(max_length=MAX_PIN_CHARS, strip=True)


PINS_PARTIAL = "compaction_app/partials/pins.html"


def _answer(request, session: Session, *, notice: str | None = None, error: str | None = None, text: str = "",
            status: int = 400):
    """The pins card re-rendered with the outcome inside it (htmx); without JavaScript a success goes back to the
    session page, and a refusal renders that page with the reason in the pins card."""
    extra = {"pin_notice": notice, "pin_error": error, "pin_text": text}
    status = status if error else 200
    if request.htmx:
        context = {"session": session, "pins": retention.session_pins(session_id=session.pk),
                   "pin_budget": retention.pin_usage(session=session), **extra}
        return render(request, PINS_PARTIAL, context, status=status)
    if error:
        return render(request, "sessions_app/session_detail.html", session_page(session=session, **extra),
                      status=status)
    messages.success(request, notice)
    return redirect("session_detail", pk=session.pk)


@require_POST
@role_required(OPERATOR)
def pin_add(request, pk: int):
    session = get_object_or_404(Session.objects.select_related("provider", "policy"), pk=pk)
    if not may_instruct(request.user):
        return _answer(request, session, error=f"Not pinned: {refusal(PIN_PATH)}", text=request.POST.get("text", ""),
                       status=403)
    form = PinForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(errs)}" for field, errs in form.errors.items())
        return _answer(request, session, error=f"Not pinned: {problems}", text=request.POST.get("text", ""))
    try:
        retention.do_add_pin(session=session, kind=form.cleaned_data["kind"], text=form.cleaned_data["text"],
                             actor=request.user)
    except PinBudgetExceeded as exc:
        return _answer(request, session, error=f"Not pinned: {exc}.", text=form.cleaned_data["text"], status=409)
    return _answer(request, session, notice="Pinned: the model sees it from its next request, it is kept through "
                                            "every compaction and checked by the scorer.")


@require_POST
@role_required(OPERATOR)
def pin_remove(request, pk: int, pin_id: str):
    session = get_object_or_404(Session.objects.select_related("provider", "policy"), pk=pk)
    try:
        retention.do_remove_pin(session=session, pin_id=pin_id, actor=request.user)
    except KeyError:
        return _answer(request, session, error="That pin does not exist (already removed?).")
    return _answer(request, session, notice="Unpinned.")
