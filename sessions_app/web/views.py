"""Pages: the fleet board, a session's live view, their HTTP re-sync fragments, and the operator's forms (start and
control simulated sessions, compact now). Thin: parse, check the role, call a service or selector, render.

Every page is readable without JavaScript; with it, one websocket per page keeps it live (sessions_app.live.consumers)
and the same partials render the first load, each update and each re-sync (sessions_app.live.render).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from compaction_app.models import CompactionPolicy, Provider
from compaction_app.selectors import chosen_providers
from compactweb.api_errors import status_for
from compactweb.roles import OPERATOR, role_required
from sessions_app.compactions.alerts import recent_alerts
from sessions_app.compactions.queue import CompactionRequestRefused, request_notice
from sessions_app.fleet import runtime as fleet_runtime
from sessions_app.fleet.filter import FILTER_STATES, FleetFilter
from sessions_app.fleet.paging import NEAREST_LIMIT, SORTS, FleetPage
from sessions_app.jobs.tasks import do_request_compaction
from sessions_app.live import render as live_render
from sessions_app.live.selectors import fleet_sources
from sessions_app.models import Session, SimulatorRun
from sessions_app.simulator.scenarios import list_scenarios
from sessions_app.web.forms import CompactNowForm, FleetStartForm, HistoryPageForm
from sessions_app.web.pages import STRATEGIES, session_page
from sessions_app.web.shortcuts import safe_next

MAX_FLEET = FleetStartForm.MAX_FLEET
RUN_ACTIONS = ("pause", "resume", "stop")


def _session_or_404(pk: int) -> Session:
    return get_object_or_404(Session.objects.select_related("provider", "policy"), pk=pk)


def _start_form_context() -> dict:
    """What the start-fleet form offers (its named partial renders alone for an htmx answer)."""
    return {"scenarios": list_scenarios(), "providers": chosen_providers(),
            "policies": CompactionPolicy.objects.order_by("name"), "max_fleet": MAX_FLEET}


def _fleet_page(request, **extra):
    fleet_filter = FleetFilter.from_query(request.GET)
    page = FleetPage.from_query(request.GET)
    page = FleetPage(sort=page.sort, number=page.number)  # a full load ranks the page again
    context = live_render.fleet_context(fleet_filter=fleet_filter, page=page)
    query = {**fleet_filter.as_query(), **({"sort": page.sort} if page.sort != NEAREST_LIMIT else {})}

    def link(number: int) -> str:
        return urlencode({**query, **({"page": number} if number > 1 else {})})

    context.update(
        nav="fleet",
        states=FILTER_STATES,
        sorts=SORTS,
        sources=fleet_sources(),
        # The filter names every provider a session runs on (derived rows included: filtering by the row a session
        # is on); the start form offers only the ones an operator made (compaction_app.selectors.chosen_providers).
        filter_providers=Provider.objects.order_by("name"),
        # the live connection follows exactly the rows this page shows (the re-sync asks for the rows it holds)
        ws_query=urlencode({**query, "rows": context["page_ids"]}),
        resync_query=urlencode(query),
        prev_query=link(page.number - 1) if page.number > 1 else None,
        next_query=link(page.number + 1) if context["has_next"] else None,
        rerank_query=link(page.number),
        recent_alerts=recent_alerts(),
        **_start_form_context(),
        **extra,
    )
    return context


@require_GET
@role_required(OPERATOR)
def fleet(request):
    return render(request, "sessions_app/fleet.html", _fleet_page(request))


@require_GET
@role_required(OPERATOR)
def fleet_rows(request):
    """The fleet table as an out-of-band fragment (the page's re-sync after a reconnect or an unknown row)."""
    return HttpResponse(live_render.fleet_table(fleet_filter=FleetFilter.from_query(request.GET),
                                                page=FleetPage.from_query(request.GET)))


@require_GET
@role_required(OPERATOR)
def session_detail(request, pk: int):
    return render(request, "sessions_app/session_detail.html", session_page(session=_session_or_404(pk)))


@require_GET
@role_required(OPERATOR)
def session_live(request, pk: int):
    """The session's live region as out-of-band fragments (the page's re-sync after a seq gap or a reconnect)."""
    return HttpResponse(live_render.session_region(session=_session_or_404(pk)))


@require_GET
@role_required(OPERATOR)
def session_history_page(request, pk: int):
    """A page of older history items, before position `before` (the session page shows the newest page)."""
    form = HistoryPageForm(request.GET)
    if not form.is_valid():
        return HttpResponse(status=400)
    return HttpResponse(live_render.history_page(session=_session_or_404(pk), before=form.cleaned_data["before"]))


GATEWAY = "gateway"  # a session recorded by gateway_app (its recording.GATEWAY_SOURCE, a floor above this one)
GATEWAY_COMPACT_HERE = ("Not compacted: this session runs through the gateway, so a compaction here would change "
                        "compactweb's record only and the client's next request would bring its history back; use "
                        "Compact at the next request on the gateway card.")


@require_POST
@role_required(OPERATOR)
def compact_now(request, pk: int):
    """Start a manual compaction (a job a runner takes at once), or queue it behind the running step; the job's
    progress and the compaction's result arrive over the session's websocket. A refusal is answered with the form and its reason (htmx swaps 4xx, see base.html)."""
    session = _session_or_404(pk)
    form = CompactNowForm(request.POST)
    strategy, instructions = request.POST.get("strategy", ""), request.POST.get("instructions", "").strip()
    error, status, notice = None, 200, None
    if not form.is_valid():
        error, status = form.first_error(), 400
    elif session.source == GATEWAY:  # the page offers no form for it: a form from before, or a hand-made post
        error, status = GATEWAY_COMPACT_HERE, 409
    else:
        try:
            job = do_request_compaction(session_id=session.pk, actor=request.user,
                                        strategy=form.cleaned_data["strategy"] or None,
                                        instructions=form.cleaned_data["instructions"])
        except CompactionRequestRefused as exc:
            error, status = str(exc), status_for(exc)
        else:
            notice = request_notice(job)
    if request.htmx:
        context = {"s": {"id": session.pk}, "strategies": STRATEGIES, "notice": notice, "error": error,
                   "chosen": strategy, "instructions": "" if notice else instructions}
        return render(request, "sessions_app/session_detail.html#compact_form", context, status=status)
    (messages.success if notice else messages.error)(request, notice or error)
    return redirect("session_detail", pk=session.pk)


@require_POST
@role_required(OPERATOR)
def fleet_start(request):
    """Start simulated sessions: scenario, count, provider, policy, pacing, and optionally a context window (blank:
    the window the scenario suggests). A refusal is shown in the form, with what was typed kept: with htmx the form
    partial alone (the new rows arrive over the fleet's websocket), without it the whole board."""
    form = FleetStartForm(request.POST, scenarios=list_scenarios())
    error = None
    if not form.is_valid():
        error = form.first_error()
    else:
        data = form.cleaned_data
        try:
            fleet_runtime.do_start_fleet(
                scenario=data["scenario"], count=data["count"], provider=data["provider"], policy=data["policy"],
                turns_per_minute=data["turns_per_minute"], loop=data["loop"],
                context_window=data["context_window"], actor=request.user,
            )
        except ValueError as exc:
            error = str(exc)
    if error:
        if request.htmx:
            context = {**_start_form_context(), "start": request.POST, "start_error": error}
            return render(request, "sessions_app/fleet.html#start_form", context, status=400)
        return render(request, "sessions_app/fleet.html",
                      _fleet_page(request, start=request.POST, start_error=error), status=400)
    notice = f"Started {data['count']} × {data['scenario']}."
    if request.htmx:
        return render(request, "sessions_app/fleet.html#start_form", {**_start_form_context(), "start_notice": notice})
    messages.success(request, notice)
    return redirect(safe_next(request, reverse("fleet")))


@require_POST
@role_required(OPERATOR)
def run_action(request, pk: int, action: str):
    """Pause, resume or stop the simulated run driving a session. With htmx the answer is the control's new state
    at once (the fleet row, or the session page's run card); a refusal says why where the user clicked."""
    if action not in RUN_ACTIONS:
        raise Http404("no such action")
    session = _session_or_404(pk)
    run = SimulatorRun.objects.filter(session=session).first()
    error = None
    if run is None:
        error = f"Session {pk} is not driven by the simulator."
    else:
        service = getattr(fleet_runtime, f"do_{action}_run")
        try:
            service(run=run, actor=request.user)
        except ValueError as exc:
            error = str(exc)
    if request.htmx:
        if error:
            return HttpResponse(error, status=409, content_type="text/plain; charset=utf-8",
                                headers={"HX-Reswap": "none"})
        if request.htmx.target == "run-controls":
            return HttpResponse(live_render.run_controls(session_id=session.pk))
        return HttpResponse(live_render.fleet_row(session_id=session.pk))
    if error:
        messages.error(request, error)
    return redirect(safe_next(request, reverse("fleet")))
