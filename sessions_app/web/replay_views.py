"""The replay comparison (operator): a session's replays under other policies next to it, and the form that
starts another, which runs as a background job (sessions_app.jobs) like Compact now. Thin: parse the form, check
the role, submit the job or read the comparisons, render; while a replay job waits or runs, the replays partial
polls itself (htmx) so the comparison appears when the job finishes."""

from __future__ import annotations

from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from compaction_app.models import CompactionPolicy
from compaction_app.selectors import chosen_providers
from compactweb.converters import MAX_ID
from compactweb.roles import OPERATOR, role_required
from sessions_app.jobs.selectors import replay_jobs
from sessions_app.jobs.tasks import do_submit_job
from sessions_app.models import Job, Session
from sessions_app.transfer.replay import replay_comparison
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
            # A background job, as Compact now is: the replay re-runs the whole session, far too long for a request.
            job = do_submit_job(kind=Job.Kind.REPLAY, session_id=session.pk, actor=request.user, params={
                "policy": policy.pk, "provider": provider.pk if provider else None, "title": None})
            # No success notice: the job's own line on the page says how it goes, failed included (a green
            # "started" beside a failed replay read as done).
            return HttpResponseRedirect(f'{reverse("replay_compare", args=[session.pk])}?job={job.pk}')
    comparisons = []
    if session.origin_id is not None:
        comparisons.append(replay_comparison(replay=session))
    for replay in session.replays.select_related("provider", "policy").order_by("-pk")[:20]:
        comparisons.append(replay_comparison(replay=replay))
    jobs = list(replay_jobs(session_id=session.pk))
    started = _started_job(request, session=session, jobs=jobs)
    template = "sessions_app/replay_compare.html"
    if request.htmx and request.method == "GET":
        template += "#replays"  # the partial's own poll: the same partial the page renders first
    return render(request, template, dict(
        nav="fleet", session=session, comparisons=comparisons, jobs=jobs,
        pending=any(j.status in (Job.Status.QUEUED, Job.Status.RUNNING) for j in jobs),
        policies=CompactionPolicy.objects.order_by("name"), providers=chosen_providers(),
        session_url=reverse("session_detail", args=[session.pk]), replay_error=error,
        chosen=request.POST if request.method == "POST" else {}, started=started,
        # the partial's poll keeps the started job in view
        started_query=f"job={_job_number(request)}" if _job_number(request) else "",
    ), status=status)


def _started_job(request, *, session: Session, jobs: list[Job]) -> Job | None:
    """The replay job the operator just started (`?job=`), when it succeeded: the other states have a line of
    their own (sessions_app.jobs.selectors.replay_jobs)."""
    number = _job_number(request)
    if number is None or any(j.pk == number for j in jobs):
        return None
    return Job.objects.filter(pk=number, session_id=session.pk, kind=Job.Kind.REPLAY,
                              status=Job.Status.SUCCEEDED).first()


def _job_number(request) -> int | None:
    text = str(request.GET.get("job") or "")
    return int(text) if text.isdigit() and 0 < int(text) <= MAX_ID else None
