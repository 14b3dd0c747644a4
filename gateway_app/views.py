"""The gateway's pages (issue 29): an operator's actions on a gateway session, from its session page, and a user's
own gateway keys."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from compactweb.roles import OPERATOR, role_required
from gateway_app.keys import (
    do_create_user_gateway_key,
    do_revoke_user_gateway_key,
    user_key_routes,
    user_keys,
)
from gateway_app.models import GatewayKey, GatewaySession
from gateway_app.operator import NotSteerable, client_label, do_request_compaction, do_set_paused

DONE = {  # {client}: the session's client, as operator.client_label names it
    "pause": "Paused: the {client} session's next request gets an error saying so.",
    "resume": "Resumed: the {client} session's requests go through again.",
    "compact": "Asked for: the gateway runs the route policy's compaction before forwarding {client}'s next request, "
               "and says here what it did.",
}


@require_POST
@role_required(OPERATOR)
def gateway_action(request, session_id: int, action: str):
    if action not in DONE:
        raise Http404("no such gateway action")
    gs = get_object_or_404(GatewaySession, session_id=session_id)
    try:
        if action == "compact":
            do_request_compaction(session_id=gs.session_id, actor=request.user)
        else:
            do_set_paused(session_id=gs.session_id, paused=action == "pause", actor=request.user)
    except NotSteerable as exc:  # a page from before the card said so: nothing was done, and it says why
        messages.error(request, f"Not done: {exc}.")
    else:
        messages.success(request, DONE[action].format(client=client_label(gs)))
    return redirect(reverse("session_detail", args=[session_id]))


class UserKeyForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True, help_text="e.g. laptop, CI runner")


def _keys_page(request, *, form: UserKeyForm, new_key=None, status: int = 200):
    return render(request, "gateway_app/keys.html", {
        "nav": "gateway_keys", "form": form, "new_key": new_key, "keys": user_keys(user=request.user),
        "routes": user_key_routes()}, status=status)


@role_required(OPERATOR)
def gateway_keys(request):
    """A user's own gateway keys: list, create (the key shown once, in this answer only)."""
    if request.method != "POST":
        return _keys_page(request, form=UserKeyForm())
    form = UserKeyForm(request.POST)
    if not form.is_valid():
        return _keys_page(request, form=form, status=400)
    new = do_create_user_gateway_key(user=request.user, name=form.cleaned_data["name"])
    response = _keys_page(request, form=UserKeyForm(), new_key=new)
    response["Cache-Control"] = "no-store"  # the key must not stay in a cache
    return response


@require_POST
@role_required(OPERATOR)
def gateway_key_revoke(request, key_id: int):
    try:
        do_revoke_user_gateway_key(user=request.user, key_id=key_id)
    except GatewayKey.DoesNotExist:
        raise Http404("no such key of yours") from None
    messages.success(request, "Revoked: the key stops working within seconds.")
    return redirect(reverse("gateway_keys"))
