"""Pages: pin and unpin context from the session page (operator role). Thin: a Django Form, the retention service,
a redirect back to the session with the outcome in the messages framework."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from compaction_app.engine.pins import MAX_PIN_CHARS, PinKind
from compactweb.roles import OPERATOR, role_required
from sessions_app.compactions import retention
from sessions_app.models import Session


class PinForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k.value, k.value) for k in PinKind], initial=PinKind.CONSTRAINT.value)
    text = forms.CharField(max_length=MAX_PIN_CHARS, strip=True)


@require_POST
@role_required(OPERATOR)
def pin_add(request, pk: int):
    session = get_object_or_404(Session, pk=pk)
    form = PinForm(request.POST)
    if form.is_valid():
        retention.do_add_pin(session=session, kind=form.cleaned_data["kind"], text=form.cleaned_data["text"],
                             actor=request.user)
        messages.success(request, "Pinned: it will be kept through every compaction and checked by the scorer.")
    else:
        problems = "; ".join(f"{field}: {' '.join(errs)}" for field, errs in form.errors.items())
        messages.error(request, f"Not pinned: {problems}")
    return redirect("session_detail", pk=session.pk)


@require_POST
@role_required(OPERATOR)
def pin_remove(request, pk: int, pin_id: str):
    session = get_object_or_404(Session, pk=pk)
    try:
        retention.do_remove_pin(session=session, pin_id=pin_id, actor=request.user)
        messages.success(request, "Unpinned.")
    except KeyError:
        messages.error(request, "That pin does not exist (already removed?).")
    return redirect("session_detail", pk=session.pk)
