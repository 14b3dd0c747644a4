"""The replay comparison (operator): a session's replays under other policies next to it, and the form that
starts another. Thin: parse the form, check the role, call sessions_app.transfer, render."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from compaction_app.models import CompactionPolicy, Provider
from compactweb.roles import OPERATOR, role_required
from sessions_app.models import Session
from sessions_app.transfer.refusals import TransferRefused
from sessions_app.transfer.replay import do_replay_session, replay_comparison
from sessions_app.web.forms import ReplayForm


@role_required(OPERATOR)
@require_http_methods(["GET", "POST"])
def replay_compare(request, pk: int):
    """A session's replays under other policies next to it (or, for a replay, next to its original), and a form to
    start another replay."""
    session = get_object_or_404(Session.objects.select_related("provider", "policy", "origin"), pk=pk)
    error, status = None, 200
    if request.method == "POST":
        form = ReplayForm(request.POST)
        if not form.is_valid():
            error, status = "Choose the policy to replay under.", 400
        else:
            policy, provider = form.cleaned_data["policy"], form.cleaned_data["provider"]
            try:
                result = do_replay_session(session_id=session.pk, policy=policy, provider=provider,
                                           actor=request.user)
            except TransferRefused as exc:  # shown in the form that asked, like a bad choice
                error, status = str(exc), exc.status
            else:
                failed = f"; {len(result.failures)} compaction(s) failed" if result.failures else ""
                messages.success(request, f"Replayed as session #{result.replay.pk}: {result.turns} turns, "
                                 f"{result.compactions} compaction(s){failed}.")
                return HttpResponseRedirect(reverse("replay_compare", args=[result.replay.pk]))
    comparisons = []
    if session.origin_id is not None:
        comparisons.append(replay_comparison(replay=session))
    for replay in session.replays.select_related("provider", "policy").order_by("-pk")[:20]:
        comparisons.append(replay_comparison(replay=replay))
    return render(request, "sessions_app/replay_compare.html", dict(
        nav="fleet", session=session, comparisons=comparisons,
        policies=CompactionPolicy.objects.order_by("name"), providers=Provider.objects.order_by("name"),
        session_url=reverse("session_detail", args=[session.pk]), replay_error=error,
        chosen=request.POST if request.method == "POST" else {},
    ), status=status)
