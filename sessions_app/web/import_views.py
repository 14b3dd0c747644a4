"""The rollout import upload (operator): a Codex rollout .jsonl file becomes a session. Thin: parse the form,
check the role, call the importer (sessions_app.transfer), render the refusal or redirect to the new session."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from compaction_app.models import CompactionPolicy
from compaction_app.selectors import chosen_providers
from compactweb.api_errors import status_for
from compactweb.roles import OPERATOR, role_required
from sessions_app.codex_rollout import RolloutImportError
from sessions_app.codex_rollout.parse import read_lines
from sessions_app.rollout.validation import privileged_line_paths
from sessions_app.transfer.importer import do_import_rollout
from sessions_app.transfer.refusals import TransferRefused
from sessions_app.web.forms import ImportRolloutForm
from sessions_app.web.instructing import may_instruct, refusal


@role_required(OPERATOR)
@require_http_methods(["GET", "POST"])
def import_rollout(request):
    """Upload a Codex rollout .jsonl file; a bad file is refused whole with its bad lines listed."""
    context = dict(
        nav="import", providers=chosen_providers(), policies=CompactionPolicy.objects.order_by("name"),
        errors=None, result=None, form=request.POST,
    )
    if request.method == "GET":
        return render(request, "sessions_app/import.html", context)
    # with htmx only the form answers (its refusal inside it); without, the whole page
    template = "sessions_app/import.html#import_form" if request.htmx else "sessions_app/import.html"
    form = ImportRolloutForm(request.POST, request.FILES)
    if not form.is_valid():
        first = next(iter(form.errors.values()))[0]
        context["errors"] = {"message": first, "lines": []}
        return render(request, template, context, status=400)
    data = form.cleaned_data
    upload = data["file"]
    try:
        # One line past the limit refuses the file while it is read (issue 27).
        lines = read_lines(upload.chunks(), max_line_bytes=settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES,
                           source_name=upload.name or "upload")
        privileged = privileged_line_paths(lines)
        if privileged and not may_instruct(request.user):
            context["errors"] = {"message": refusal(privileged[0]), "lines": []}
            return render(request, template, context, status=403)
        result = do_import_rollout(
            lines=lines, source_name=upload.name or "upload",
            title=data["title"] or None, provider=data["provider"], policy=data["policy"],
            new_thread_id=data["new_thread_id"], actor=request.user, strict=data["strict"],
        )
    except RolloutImportError as exc:
        context["errors"] = {"message": str(exc), "lines": exc.errors[:50], "more": max(0, len(exc.errors) - 50)}
        return render(request, template, context, status=400)
    except TransferRefused as exc:
        context["errors"] = {"message": str(exc), "lines": [],
                             "session": getattr(exc, "session_id", None)}
        return render(request, template, context, status=status_for(exc))
    skipped = f"; {result.skipped_count} line(s) of unknown kinds skipped" if result.skipped_count else ""
    if result.problems:
        first = result.problems[0]
        skipped += (f"; {result.skipped_lines} line(s) skipped and {result.repaired_lines} repaired "
                    f"(first: line {first.line_no}, {first.reason})")
    messages.success(request, f"Imported {upload.name} as session #{result.session.pk}: {result.lines_imported} "
                     f"rollout lines, {result.compactions} compaction(s){skipped}.")
    new_session = reverse("session_detail", args=[result.session.pk])
    if request.htmx:
        return HttpResponse(status=204, headers={"HX-Redirect": new_session})
    return HttpResponseRedirect(new_session)
