"""Reads of compactions: a session's compactions, one compaction, attempts, the live history right before a
compaction, and where the prompt it was made with lives now."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from compaction_app.engine.prompts import SUMMARIZATION_PROMPT, prompt_version
from compaction_app.models import Compaction, CompactionAttempt, CompactionPolicy, Prompt
from sessions_app.compactions.settings_builder import RETRY_PROMPT_SUFFIX
from sessions_app.models import RolloutLine
from sessions_app.rollout import projection as p


def list_compactions(*, session_id: int) -> QuerySet[Compaction]:
    """A session's compactions, oldest first (the order of their `compacted` lines)."""
    return Compaction.objects.filter(session_id=session_id).order_by("rollout_seq")


def get_compaction(*, compaction_id: int) -> Compaction:
    """One compaction; raises Compaction.DoesNotExist."""
    return Compaction.objects.select_related("session").get(pk=compaction_id)


def attempts_for(
    *, compaction: Compaction | None = None, session_id: int | None = None, status: str | None = None
) -> QuerySet[CompactionAttempt]:
    """The attempts of one compaction, or of a session (including failed and interrupted ones), newest first."""
    attempts = CompactionAttempt.objects.select_related("session")
    if compaction is not None:
        attempts = attempts.filter(compaction=compaction)
    if session_id is not None:
        attempts = attempts.filter(session_id=session_id)
    if status:
        attempts = attempts.filter(status=status)
    return attempts.order_by("-started_at", "-pk")


def get_attempt(*, attempt_id: int) -> CompactionAttempt:
    """One attempt with its hook runs; raises CompactionAttempt.DoesNotExist."""
    return CompactionAttempt.objects.select_related("session").prefetch_related("hook_runs").get(pk=attempt_id)


def _line(row: RolloutLine) -> p.Line:
    return p.Line(seq=row.seq, kind=row.kind, payload=row.payload, tokens=row.tokens, item_tokens=row.item_tokens)


def history_before(*, session_id: int, seq: int) -> list[p.Entry]:
    """The live history right before rollout line `seq`: the projection fold (spec §8.2) of the lines before it.

    The fold starts at the newest history-installing line before `seq` (everything earlier is replaced by it), so
    the cost is O(lines since the previous compaction), not O(rollout).
    """
    base = (
        RolloutLine.objects.filter(session_id=session_id, seq__lt=seq, kind__in=p.HISTORY_INSTALLING_KINDS)
        .order_by("-seq").values_list("seq", flat=True).first()
    )
    start = base if base is not None else 1
    projection = p.Projection()
    projection.header = p.Header(last_seq=start - 1)
    rows = RolloutLine.objects.filter(session_id=session_id, seq__gte=start, seq__lt=seq).order_by("seq")
    for row in rows.iterator(chunk_size=1000):
        projection.apply(_line(row))
    return projection.entries


@dataclass(frozen=True)
class PromptSource:
    """Where the summarisation prompt a compaction recorded lives now: its text when a configured prompt still has
    that version (the default, a stored prompt, a policy's compact_prompt), the stored prompt or policy that holds
    it (or, edited since, the stored prompt of that name and its current version)."""

    text: str | None
    prompt_id: int | None = None
    policy_id: int | None = None
    current_version: str | None = None


def prompt_source(*, compaction: Compaction) -> PromptSource | None:
    """The prompt a compaction was made with, found by its recorded version among the configured prompts (a few
    rows); None when it recorded none."""
    version = compaction.prompt_version
    if not version:
        return None
    if prompt_version(SUMMARIZATION_PROMPT) == version:
        return PromptSource(text=SUMMARIZATION_PROMPT)
    stored = list(Prompt.objects.only("pk", "name", "text"))
    for prompt in stored:
        if prompt_version(prompt.text) == version:
            return PromptSource(text=prompt.text, prompt_id=prompt.pk)
    for pk, text in CompactionPolicy.objects.exclude(compact_prompt="").values_list("pk", "compact_prompt"):
        if prompt_version(text) == version:
            return PromptSource(text=text, policy_id=pk)
    # Edited since: the text it was made with is no longer stored; the prompt of that name still is.
    name = (compaction.prompt_name or "").removesuffix(RETRY_PROMPT_SUFFIX)
    for prompt in stored:
        if prompt.name == name:
            return PromptSource(text=None, prompt_id=prompt.pk, current_version=prompt_version(prompt.text))
    return PromptSource(text=None)
