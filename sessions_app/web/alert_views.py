"""Pages: the alerts list with its filters, and acknowledge / snooze / silence / lift (operator role). Thin: a Django
Form, the alert services of sessions_app.compactions.alerts, a redirect back to `next` or the alerts page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.http import require_GET, require_POST

from compaction_app.models import Alert, AlertSilence
from compactweb.converters import MAX_ID
from compactweb.roles import OPERATOR, role_required
from sessions_app.compactions import alerts
from sessions_app.live import render as live_render
from sessions_app.models import Session
from sessions_app.web.shortcuts import safe_next

KIND_CHOICES = [("", "any rule"), *Alert.Kind.choices]


class AlertFilterForm(forms.Form):
    kind = forms.ChoiceField(choices=KIND_CHOICES, required=False)
    session = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    state = forms.ChoiceField(choices=[("open", "open"), ("snoozed", "snoozed or silenced"), ("acknowledged", "acknowledged"),
                                       ("all", "all")],
                              required=False, initial="open")


class SilenceForm(forms.Form):
    kind = forms.ChoiceField(choices=KIND_CHOICES, required=False)
    session = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID)
    minutes = forms.IntegerField(required=False, min_value=1, max_value=60 * 24 * 30)
    reason = forms.CharField(required=False, max_length=200)


def _done(request, *, ok: str | None = None, error: str | None = None, status: int = 400):
    """An htmx request (the live alerts card) gets the card's list again, out of band; a plain form post goes back
    to the alerts page with a message."""
    if request.htmx:
        scope = request.POST.get("scope")
        html = live_render.alerts_update(session_id=int(scope) if scope and scope.isdigit() else None)
        return HttpResponse(escape(error) if error else html, status=status if error else 200)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, ok)
    return redirect(safe_next(request, "alerts"))


@require_GET
@role_required(OPERATOR)
def alerts_page(request):
    form = AlertFilterForm(request.GET or None)
    valid = form.is_valid() if form.is_bound else True
    f = form.cleaned_data if form.is_bound and valid else {}
    # A bad filter (an unknown rule, a session number past 64 bits) is the form's error, answered 400, and lists
    # nothing rather than everything.
    rows = alerts.alerts_filtered(kind=f.get("kind") or None, session_id=f.get("session"),
                                  state=f.get("state") or "open", limit=200) if valid else []
    return render(request, "compaction_app/alerts.html", {
        "nav": "alerts", "form": form, "rows": rows, "silences": alerts.active_silences(),
        "kinds": Alert.Kind.choices, "as_of": timezone.now(),
    }, status=200 if valid else 400)


@require_POST
@role_required(OPERATOR)
def alert_acknowledge(request, pk: int):
    alert = get_object_or_404(Alert, pk=pk)
    alerts.do_acknowledge_alert(alert=alert, actor=request.user)
    return _done(request, ok=f"Alert #{alert.pk} acknowledged.")


@require_POST
@role_required(OPERATOR)
def alert_silence(request):
    form = SilenceForm(request.POST)
    if not form.is_valid():
        return _done(request, error="Not silenced: " + "; ".join(f"{k}: {' '.join(v)}"
                                                                  for k, v in form.errors.items()))
    data = form.cleaned_data
    if data.get("session") is not None:
        get_object_or_404(Session, pk=data["session"])
    try:
        alerts.do_silence_alerts(kind=data.get("kind") or "", session_id=data.get("session"),
                                 minutes=data.get("minutes"), actor=request.user, reason=data.get("reason") or "")
    except ValueError as exc:
        return _done(request, error=f"Not silenced: {exc}.")
    except alerts.SilenceNotAllowed as exc:
        return _done(request, error=f"Not silenced: {exc}.", status=403)
    return _done(request, ok="Snoozed." if data.get("minutes") else "Silenced until lifted.")


@require_POST
@role_required(OPERATOR)
def alert_silence_lift(request, pk: int):
    try:
        alerts.do_lift_silence(silence=get_object_or_404(AlertSilence, pk=pk), actor=request.user)
    except alerts.SilenceNotAllowed as exc:
        return _done(request, error=f"Not lifted: {exc}.", status=403)
    return _done(request, ok="Silence lifted.")
