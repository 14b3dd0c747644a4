"""A user's own API tokens page (issue 45): mint one (shown once, in that answer only; knox keeps its digest) and
revoke one, without the server's shell."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from compactweb.api_tokens import issue_token, revoke_token, user_tokens
from compactweb.roles import OPERATOR, role_required


def _page(request, *, new_token: str | None = None):
    response = render(request, "sessions_app/api_tokens.html", {
        "nav": "api_tokens", "tokens": user_tokens(user=request.user), "new_token": new_token})
    if new_token:
        response["Cache-Control"] = "no-store"  # the token must not stay in a cache
    return response


@role_required(OPERATOR)
def api_tokens(request):
    """GET: the user's tokens; POST: mint one and show it once."""
    if request.method == "POST":
        return _page(request, new_token=issue_token(user=request.user))
    return _page(request)


@require_POST
@role_required(OPERATOR)
def api_token_revoke(request, token_key: str):
    if not revoke_token(user=request.user, token_key=token_key):
        raise Http404("no such token of yours")
    messages.success(request, "Revoked: the token no longer works.")
    return redirect("api_tokens")
