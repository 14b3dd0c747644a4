"""Codex rollout export and import, and replay of a session under another policy (spec §8.2, §15; design user
story 7).

Import is all or nothing: the file is parsed and every line validated before anything is written (a bad line is
reported with its 1-based number and nothing is stored), then the session, its rollout and its Compaction rows are
written in one transaction. Export writes the rollout as Codex rollout JSON Lines; compactweb-only lines (rollback,
redo, window_opened) travel as a `compacted` line plus an inert `compactweb_line` event, and this importer turns
such a pair back into the original line, so export then import gives the same live history and the same
rolled-back compactions.

Replay re-appends the original's response items in order to a new session under another policy and lets the
pre-turn auto compaction of that policy run between turns (spec §2.4 step 1b), without calling the model for the
turns themselves: "what would have happened with threshold X or strategy Y".
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from uuid6 import uuid7

from compaction_app.audit import record_audit
from compaction_app.config_services import derived_provider
from compaction_app.engine import meter as m
from compaction_app.engine.items import SUMMARY_PREFIX, is_message, is_real_user_message, message_text
from compaction_app.engine.pins import PIN_EVENTS
from compaction_app.engine.thresholds import token_status
from compaction_app.engine.vocabulary import Phase, Reason, Trigger
from compaction_app.engine.windows import new_window_id
from compaction_app.models import AuditEntry, Compaction, CompactionPolicy, Provider
from sessions_app.codex_rollout import (
    ImportedLine,
    ParsedRollout,
    RolloutImportError,
    export_lines,
    parse_rollout,
)
from sessions_app.codex_rollout.convert import convert_lines
from sessions_app.codex_rollout.export import COMPACTWEB_EVENT
from sessions_app.codex_rollout.labels import Labeler, Labels, implementation_of
from sessions_app.codex_rollout.parse import REPAIRED, SKIPPED, LineProblem, RawLine, split_raw_lines
from sessions_app.compactions.rollback import (
    RollbackRefused,
    compaction_key,
    fold_compaction_states,
    thread_rollback_line,
)
from sessions_app.compactions.services import (
    CompactionFailed,
    CompactionInterrupted,
    CompactionRefused,
    do_compact_session,
)
from sessions_app.models import (
    CodexSource,
    CodexSourceLine,
    ContextWindow,
    LiveItem,
    RolloutLine,
    Session,
    StagedRolloutLine,
)
from sessions_app.rollout import projection as p
from sessions_app.rollout import selectors as rollout_selectors
from sessions_app.rollout.events import publish_transient
from sessions_app.rollout.lease import IMPORTING_SOURCE, LeaseLost, SessionBusy
from sessions_app.rollout.selectors import rollout_line_dicts
from sessions_app.rollout.services import (
    NewLine,
    append_rollout_lines,
    do_append_items,
    do_create_session,
    install_staged_lines,
)
from sessions_app.rollout.signals import rollout_appended
from sessions_app.rollout.validation import ItemValidationError, validate_item, validate_items
from sessions_app.transfer import codex_sources

IMPORTED = "imported"
FOLLOWED = "followed"
IMPORTING = IMPORTING_SOURCE  # an import in progress: read-only, replaced by IMPORTED/FOLLOWED when it lands
REPLAY = "replay"
# Kinds a `compactweb_line` marker event restores on import (see sessions_app.codex_rollout.export).
_RESTORABLE_WITH_HISTORY = frozenset({p.ROLLBACK, p.REDO})
_RESTORABLE_ALONE = frozenset({p.WINDOW_OPENED})
THREAD_ROLLBACK_SOURCES = frozenset({"thread_rollback", "codex_thread_rolled_back"})
TURN_STARTED_EVENTS = frozenset({"turn_started", "task_started"})


class TransferRefused(Exception):
    """An import or replay that cannot run as asked; nothing was stored. `status` is the HTTP status to answer."""

    status = 400
    code = "invalid"

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        if status:
            self.status = status
        if code:
            self.code = code


class AlreadyImported(TransferRefused):
    status = 409
    code = "already_imported"

    def __init__(self, *, thread_id: str, session_id: int) -> None:
        self.session_id = session_id
        super().__init__(f"thread {thread_id} is already imported as session {session_id}")


# --- plain data ----------------------------------------------------------------------------------------------------


def restore_compactweb_kinds(lines: list[ImportedLine]) -> list[ImportedLine]:
    """Undo the export's mapping of compactweb-only kinds: a `compacted` line with an empty message followed by a
    `compactweb_line` event for a rollback or redo becomes that line again (the event's payload plus the
    replacement history), and a lone marker for a `window_opened` line becomes that line. Other lines pass."""
    out: list[ImportedLine] = []
    skip_next = False
    for line, following in itertools.zip_longest(lines, lines[1:]):
        if skip_next:
            skip_next = False
            continue
        marker = _marker(following)
        if (
            line.kind == p.COMPACTED and not line.payload.get("message") and marker is not None
            and marker["kind"] in _RESTORABLE_WITH_HISTORY
        ):
            payload = {**marker["payload"], "replacement_history": line.payload["replacement_history"]}
            out.append(ImportedLine(marker["kind"], payload, line.timestamp, line.source_line_no))
            skip_next = True
            continue
        own = _marker(line)
        if own is not None and own["kind"] in _RESTORABLE_ALONE:
            out.append(ImportedLine(own["kind"], dict(own["payload"]), line.timestamp, line.source_line_no))
            continue
        out.append(line)
    return out


def _marker(line: ImportedLine | None) -> dict[str, Any] | None:
    if line is None or line.kind != p.EVENT_MSG or line.payload.get("type") != COMPACTWEB_EVENT:
        return None
    if not isinstance(line.payload.get("kind"), str) or not isinstance(line.payload.get("payload"), dict):
        return None
    return line.payload


@dataclass(frozen=True)
class CompactionFigures:
    """One compacted line measured by the fold: active tokens (the meter, spec §3.2) and the history estimate
    (base instructions + every item's stored count) right before and right after it."""

    seq: int
    active_before: int
    active_after: int
    estimate_before: int
    estimate_after: int


@dataclass
class RolloutFigures:
    """A whole rollout measured: its compactions, the peak of the history estimate, the final state."""

    compactions: list[CompactionFigures] = field(default_factory=list)
    peak_estimate: int = 0
    peak_active: int = 0
    final_estimate: int = 0
    final_items: int = 0

    @property
    def tokens_saved(self) -> int:
        return sum(max(0, c.estimate_before - c.estimate_after) for c in self.compactions)

    def as_dict(self) -> dict[str, int]:
        return {
            "compactions": len(self.compactions),
            "peak_tokens": self.peak_estimate,
            "tokens_saved": self.tokens_saved,
            "final_tokens": self.final_estimate,
            "final_items": self.final_items,
            "peak_active_tokens": self.peak_active,
        }


def _estimate(header: p.Header) -> int:
    return header.meter.base_tokens + header.meter.history_tokens


def measure_rollout(lines: Iterable[p.Line]) -> RolloutFigures:
    """Fold a rollout and measure it. Peaks and savings use the history estimate so that a session with server
    usage (an imported Codex rollout) and its replay (estimates only) compare like with like."""
    projection = p.Projection()
    figures = RolloutFigures()
    for line in lines:
        before = projection.header
        projection.apply(line)
        after = projection.header
        if line.kind == p.COMPACTED:
            figures.compactions.append(
                CompactionFigures(
                    seq=line.seq, active_before=m.active_total(before.meter), active_after=m.active_total(after.meter),
                    estimate_before=_estimate(before), estimate_after=_estimate(after),
                )
            )
        figures.peak_estimate = max(figures.peak_estimate, _estimate(after))
        figures.peak_active = max(figures.peak_active, m.active_total(after.meter))
    figures.final_estimate = _estimate(projection.header)
    figures.final_items = len(projection.entries)
    return figures


def _strip_prefix(message: str) -> str:
    head = SUMMARY_PREFIX + "\n"
    return message[len(head):] if message.startswith(head) else message


def infer_compaction_kind(payload: dict[str, Any]) -> tuple[str, str]:
    """(implementation, strategy) of an imported compacted line, from what the line holds (see
    sessions_app.codex_rollout.labels, which also uses the lines around it)."""
    kind, _ = implementation_of(payload)
    return kind


# --- reads of a session's rollout ----------------------------------------------------------------------------------


def _fold_lines(session_id: int) -> Iterator[p.Line]:
    rows = (
        RolloutLine.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list("seq", "kind", "payload", "tokens", "item_tokens")
    )
    for seq, kind, payload, tokens, item_tokens in rows.iterator(chunk_size=2000):
        yield p.Line(seq=seq, kind=kind, payload=payload, tokens=tokens, item_tokens=item_tokens)


def session_figures(*, session: Session) -> dict[str, int]:
    """Compactions, peak tokens, tokens saved and the final state of one session, from its rollout."""
    figures = measure_rollout(_fold_lines(session.pk)).as_dict()
    figures["failed_compactions"] = session.compaction_attempts.filter(status="failed").count()
    return figures


def replay_comparison(*, replay: Session) -> dict[str, Any]:
    """The replay next to its original: the figures of both and the differences (replay minus original)."""
    if replay.origin_id is None:
        raise TransferRefused(f"session {replay.pk} is not a replay of another session", code="not_a_replay")
    original = Session.objects.select_related("provider", "policy").get(pk=replay.origin_id)
    ours, theirs = session_figures(session=replay), session_figures(session=original)
    return {
        "original": {"session": original.pk, "title": original.title, "policy": original.policy.name,
                     "provider": original.provider.name, **theirs},
        "replay": {"session": replay.pk, "title": replay.title, "policy": replay.policy.name,
                   "provider": replay.provider.name, **ours},
        "difference": {k: ours[k] - theirs[k] for k in ("compactions", "peak_tokens", "tokens_saved",
                                                        "final_tokens")},
    }


# --- export --------------------------------------------------------------------------------------------------------


def export_filename(session: Session) -> str:
    """Codex's file name pattern: rollout-<YYYY-MM-DDTHH-MM-SS>-<thread id>.jsonl (spec §15). An imported or
    followed session keeps its file's name; otherwise the time is the session's start (its session_meta)."""
    return codex_sources.export_filename(session=session)


def _session_meta(session: Session) -> dict[str, Any]:
    first = RolloutLine.objects.filter(session=session, kind=p.SESSION_META).order_by("seq").first()
    meta = dict(first.payload) if first is not None else {}
    return {
        **{k: meta[k] for k in ("cwd", "cli_version", "source", "model_provider") if meta.get(k) is not None},
        "id": str(session.thread_id),
        "timestamp": meta.get("timestamp") or (first.timestamp if first is not None else session.created_at),
        "base_instructions": meta.get("base_instructions") or {"text": session.base_instructions},
    }


def export_rollout(*, session: Session, chunk_size: int = 1000) -> Iterator[str]:
    """The session's rollout as Codex rollout JSON Lines, session_meta first, read from the database in chunks
    (spec §15). An imported or followed session gives back its file's lines exactly as they came in, then what
    compactweb added after (sessions_app.transfer.codex_sources). Raises RolloutExportError for a line Codex's format
    cannot hold."""
    if codex_sources.has_source(session=session):
        return codex_sources.export_with_source(session=session, chunk_size=chunk_size)
    return export_lines(rollout_line_dicts(session_id=session.pk, chunk_size=chunk_size), session_meta=_session_meta(session))


# --- import --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportResult:
    session: Session
    source_name: str
    lines_read: int
    lines_imported: int
    kind_counts: dict[str, int]
    skipped_kinds: dict[str, int]
    compactions: int
    legacy_compactions_rebuilt: int
    thread_rollbacks: int
    problems: list[LineProblem] = field(default_factory=list)
    strict: bool = False

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped_kinds.values())

    @property
    def skipped_lines(self) -> int:
        return sum(1 for p_ in self.problems if p_.action == SKIPPED)

    @property
    def repaired_lines(self) -> int:
        return len({p_.line_no for p_ in self.problems if p_.action == REPAIRED})

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session.pk,
            "thread_id": str(self.session.thread_id),
            "source_name": self.source_name,
            "lines_read": self.lines_read,
            "lines_imported": self.lines_imported,
            "kind_counts": self.kind_counts,
            "skipped_kinds": self.skipped_kinds,
            "skipped_count": self.skipped_count,
            "compactions": self.compactions,
            "legacy_compactions_rebuilt": self.legacy_compactions_rebuilt,
            "thread_rollbacks": self.thread_rollbacks,
            "strict": self.strict,
            "skipped_lines": self.skipped_lines,
            "repaired_lines": self.repaired_lines,
            "problems": [p_.as_dict() for p_ in self.problems],
        }


def _parse_time(value: str) -> datetime:
    """Codex writes UTC with a `Z`; a time without a zone is taken as UTC."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _validated(lines: list[ImportedLine], *, strict: bool = True
               ) -> tuple[list[NewLine], list[int], list[tuple[int, str]], list[LineProblem]]:
    """Validate every item with compactweb's item rules and parse every timestamp.

    Returns the lines to append, their source line numbers, the errors (strict: every bad line) and the problems
    (tolerant): a response_item compactweb does not know or cannot validate is kept in the source file only (it
    is never sent to a model); a bad item inside a replacement history is left out of it."""
    out: list[NewLine] = []
    numbers: list[int] = []
    errors: list[tuple[int, str]] = []
    problems: list[LineProblem] = []
    for line in lines:
        try:
            when = _parse_time(line.timestamp)
        except ValueError:
            errors.append((line.source_line_no, f"timestamp {line.timestamp!r} is not ISO-8601"))
            continue
        payload = line.payload
        if line.kind == p.RESPONSE_ITEM:
            try:
                payload = validate_item(payload, "response_item")
            except ItemValidationError as exc:
                if strict:
                    errors.append((line.source_line_no, str(exc)))
                else:
                    problems.append(LineProblem(line.source_line_no, f"{exc}: kept in the file, not in the history",
                                                SKIPPED))
                continue
        elif isinstance(payload, dict) and isinstance(payload.get("replacement_history"), list):
            try:
                payload = {**payload, "replacement_history": validate_items(
                    payload["replacement_history"], f"{line.kind}.replacement_history")}
            except ItemValidationError as exc:
                if strict:
                    errors.append((line.source_line_no, str(exc)))
                    continue
                kept = []
                for i, item in enumerate(payload["replacement_history"]):
                    try:
                        kept.append(validate_item(item, f"{line.kind}.replacement_history[{i}]"))
                    except ItemValidationError as bad:
                        problems.append(LineProblem(line.source_line_no, f"{bad}: left out of the replacement history",
                                                    REPAIRED))
                payload = {**payload, "replacement_history": kept}
        out.append(NewLine(line.kind, payload, when))
        numbers.append(line.source_line_no)
    return out, numbers, errors, problems


def _thread_id_and_time(parsed: ParsedRollout) -> tuple[uuid.UUID, datetime]:
    """The thread id and start time from the first session_meta line, which every Codex rollout starts with."""
    meta_line = next((line for line in parsed.lines if line.kind == p.SESSION_META), None)
    if meta_line is None:
        raise RolloutImportError([(1, "the rollout has no session_meta line (Codex writes one first)")],
                                 source_name=parsed.source_name)
    errors = []
    try:
        thread_id = uuid.UUID(meta_line.payload["id"])
    except ValueError:
        errors.append((meta_line.line_no, "session_meta.id is not a UUID"))
    try:
        started = _parse_time(meta_line.timestamp)
    except ValueError:
        errors.append((meta_line.line_no, f"timestamp {meta_line.timestamp!r} is not ISO-8601"))
    if errors:
        raise RolloutImportError(errors, source_name=parsed.source_name)
    return thread_id, started


def _base_text(meta: dict[str, Any]) -> str:
    base = meta.get("base_instructions")
    if isinstance(base, dict):
        return str(base.get("text") or "")
    return base if isinstance(base, str) else ""


def default_provider_and_policy(provider=None, policy=None) -> tuple[Provider, CompactionPolicy]:
    """The given provider and policy, else the first configured ones; TransferRefused when there is none."""
    provider = provider or Provider.objects.order_by("pk").first()
    policy = policy or CompactionPolicy.objects.order_by("pk").first()
    if provider is None:
        raise TransferRefused("no provider is configured: create one first or pass `provider`", code="no_provider")
    if policy is None:
        raise TransferRefused("no compaction policy is configured: create one first or pass `policy`",
                              code="no_policy")
    return provider, policy


UNTITLED_PREFIX = "imported rollout"


def title_from_lines(lines) -> str | None:
    """`imported: <the first real user message>`, or None when the lines have none yet."""
    for line in lines:
        try:
            if line.kind == p.RESPONSE_ITEM and is_real_user_message(line.payload):
                text = " ".join(message_text(line.payload).split())
                if text:
                    return f"imported: {text[:80]}"
        except (AttributeError, TypeError):  # a malformed item, reported by validation
            continue
    return None


def _title(parsed: ParsedRollout, given: str | None) -> str:
    if given:
        return given[:200]
    return title_from_lines(parsed.lines) or f"{UNTITLED_PREFIX} {parsed.source_name or ''}".strip()[:200]


def _create_compactions(session: Session, rows: list[RolloutLine], labels: dict[int, Labels] | None = None) -> int:
    """Compaction rows for the `compacted` lines among `rows`, labelled as Codex ran them (`labels` by seq,
    inferred from the rollout; sessions_app.codex_rollout.labels)."""
    compacted = [r for r in rows if r.kind == p.COMPACTED]
    if not compacted:
        return 0
    labels = labels or {}
    figures = {c.seq: c for c in measure_rollout(_fold_lines(session.pk)).compactions}
    states = fold_compaction_states((r.seq, r.kind, r.payload) for r in rows)
    created = []
    for row in compacted:
        payload, fig = row.payload, figures[row.seq]
        label = labels.get(row.seq)
        if label is None:
            (implementation, strategy), why = implementation_of(payload)
            label = Labels(implementation=implementation, strategy=strategy, phase="pre_turn", trigger="auto",
                           reason="context_limit", inferred={"implementation": why})
        key = compaction_key(window_id=payload.get("window_id"), seq=row.seq)
        created.append(Compaction(
            session=session, rollout_seq=row.seq, trigger=label.trigger, reason=label.reason, phase=label.phase,
            implementation=label.implementation, strategy=label.strategy,
            summary=_strip_prefix(payload.get("message") or ""),
            tokens_before=fig.active_before, tokens_after=fig.active_after,
            window_number=int(payload.get("window_number") or 0), window_id=payload.get("window_id") or "",
            previous_window_id=payload.get("previous_window_id") or "",
            first_window_id=payload.get("first_window_id") or "", item_id=f"imported-{row.seq}",
            rolled_back=states[key].rolled_back if key in states else False,
            inferred=dict(label.inferred),
        ))
    Compaction.objects.bulk_create(created)
    return len(created)


def provider_for_window(provider: Provider, window: int | None) -> Provider:
    """The provider with the rollout's context window: Codex reports the usable window (the model's window times
    its effective percent), so the provider's window is that divided back (compaction_app.config_services.derived_provider)."""
    if not window:
        return provider
    percent = provider.effective_context_window_percent or 100
    full = -(-window * 100 // percent)
    if provider.usable_context_window == window:
        return provider
    return derived_provider(provider, model=provider.model, context_window=full)


def do_import_rollout(
    *,
    lines: Iterable[str | bytes],
    source_name: str = "",
    title: str | None = None,
    provider: Provider | None = None,
    policy: CompactionPolicy | None = None,
    new_thread_id: bool = False,
    actor=None,
    strict: bool = False,
    follow_path: str = "",
    follow_offset: int = 0,
    follow_head: str = "",
) -> ImportResult:
    """Import one Codex rollout as a new session (source "imported", or "followed" with `follow_path`), all or
    nothing in the database (spec §15, §8.2; issue 13).

    Tolerant by default, like Codex's own loader: unparseable lines (a truncated last line), unknown kinds and
    items, NUL characters and bad timestamps are skipped or repaired and reported in `problems` with their line
    numbers. `strict` refuses the whole file instead (RolloutImportError naming every bad line). The file's
    lines are kept as they came (sessions_app.transfer.codex_sources), so an export gives them back byte for byte.
    Compactions are labelled from the rollout (sessions_app.codex_rollout.labels) and the session gets the
    context window Codex reported. Raises AlreadyImported when a session with the rollout's thread id exists
    (unless `new_thread_id`, which imports under a fresh id and keeps the original as `forked_from_id`),
    TransferRefused when no provider or policy is configured. A followed file's byte offset and head
    (`follow_offset`, `follow_head`) are stored in the import's last transaction.

    Big files (issue 13, item 5): the file is read and written IMPORT_CHUNK_LINES lines at a time, each batch in
    its own short transaction, into a staging table (StagedRolloutLine; the session is read-only, source
    "importing", meanwhile), so other writers get the database between batches. The last short transaction
    installs the staged lines into the append-only rollout with one INSERT ... SELECT, with the compactions and
    the audit entry; a failure anywhere removes the session and everything staged (`discard_import`), so an
    import lands whole or leaves nothing. Live events: one progress event per batch and one lines event.
    """
    chunks = _chunks(lines, IMPORT_CHUNK_LINES)
    first_chunk = next(chunks, [])
    raw = split_raw_lines(first_chunk)
    try:
        parsed = parse_rollout([r.raw for r in raw], source_name=source_name, strict=strict)
    except RolloutImportError as exc:
        # Strict: name every bad line of the whole file, as the unchunked reader did.
        errors = list(exc.errors)
        for more in _strict_errors_in(chunks, first_line_no=len(raw) + 1, source_name=source_name):
            errors.append(more)
        raise RolloutImportError(errors, source_name=source_name) from None
    original_id, meta_time = _thread_id_and_time(parsed)
    provider, policy = default_provider_and_policy(provider, policy)
    thread_id = uuid.UUID(int=uuid7().int) if new_thread_id else original_id
    existing = Session.objects.filter(thread_id=thread_id).values_list("pk", flat=True).first()
    if existing is not None:
        raise AlreadyImported(thread_id=str(thread_id), session_id=existing)
    meta = dict(parsed.session_meta or {})
    meta_line_no = next(line.line_no for line in parsed.lines if line.kind == p.SESSION_META)
    window_id = _meta_window_id(meta, parsed)
    meta_payload = {
        **meta,
        "id": str(thread_id),
        "model": meta.get("model") or provider.model,
        "window_number": 0,
        "window_id": window_id,
        "first_window_id": window_id,
    }
    if new_thread_id:
        meta_payload["forked_from_id"] = str(original_id)
    state = _ImportStream(strict=strict, source_name=source_name)
    final_source = FOLLOWED if follow_path else IMPORTED
    try:
        # Short transaction 1: the session (read-only while it imports: source "importing"), its first line staged.
        with transaction.atomic():
            session = Session.objects.create(
                title=_title(parsed, title), provider=provider, policy=policy,
                base_instructions=_base_text(meta), thread_id=thread_id, model=provider.model, source=IMPORTING,
            )
            meta_rows = append_rollout_lines(
                session=session, lines=[NewLine(p.SESSION_META, meta_payload, meta_time)], actor=actor,
                staged=True, publish=False)
            source = codex_sources.store_source(
                session=session, name=_file_name(source_name), raw=[], seq_by_line={}, problems=[],
                path=follow_path,
            )
    except IntegrityError:
        # Another import of the same thread won the race for the unique thread id.
        existing = Session.objects.filter(thread_id=thread_id).values_list("pk", flat=True).first()
        if existing is None:
            raise
        raise AlreadyImported(thread_id=str(thread_id), session_id=existing) from None
    try:
        state.seq_by_line[meta_line_no] = meta_rows[0].seq
        # One short transaction per batch of lines, staged (not yet in the append-only rollout): other writers get
        # the database between batches.
        with transaction.atomic():
            state.feed(session=session, source=source, raw=raw, parsed=parsed, actor=actor)
        import_batch_committed(session_id=session.pk, lines_read=state.source_lines)
        next_no = len(raw) + 1
        for chunk in chunks:
            raw = split_raw_lines(chunk)
            with transaction.atomic():
                parsed = state.parse(raw, first_line_no=next_no)
                state.feed(session=session, source=source, raw=raw, parsed=parsed, actor=actor)
            import_batch_committed(session_id=session.pk, lines_read=state.source_lines)
            next_no += len(raw)
        # The last short transaction: install the staged lines into the rollout, then the compactions and labels.
        with transaction.atomic():
            state.finish(session=session, actor=actor)
            if state.errors:
                raise _StrictRefusal(RolloutImportError(state.errors, source_name=source_name))
            install_staged_lines(session_id=session.pk)
            window = state.labeler.window
            CodexSource.objects.filter(pk=source.pk).update(
                context_window=window, problems=[x.as_dict() for x in sorted(state.problems, key=_line_of)],
                **({"offset": follow_offset, "head": follow_head} if follow_path else {}))
            updates = {"provider": provider_for_window(provider, window), "source": final_source}
            if not title and session.title.startswith(UNTITLED_PREFIX) and state.title:
                updates["title"] = state.title
            Session.objects.filter(pk=session.pk).update(**updates)
            labels = {state.seq_by_line[no]: label for no, label in state.labels.items() if no in state.seq_by_line}
            compactions = _create_compactions(session, state.compaction_rows, labels)
            result = ImportResult(
                session=session,
                source_name=source_name,
                lines_read=sum(state.kind_counts.values()),
                lines_imported=state.rows + 1,
                kind_counts=dict(state.kind_counts),
                skipped_kinds=dict(state.skipped_kinds),
                compactions=compactions,
                legacy_compactions_rebuilt=state.legacy_rebuilt,
                thread_rollbacks=state.thread_rollbacks,
                problems=sorted(state.problems, key=_line_of),
                strict=strict,
            )
            record_audit(
                action=AuditEntry.Action.IMPORT, actor=actor, session=session,
                reason=f"imported {source_name or 'a rollout'}",
                detail={k: v for k, v in result.as_dict().items() if k not in ("session", "problems")},
            )
            session.refresh_from_db()
            _publish_imported(session)
    except BaseException as exc:
        discard_import(session_id=session.pk)
        if isinstance(exc, _StrictRefusal):
            raise exc.error from None
        if isinstance(exc, (p.ProjectionError, ValueError)):
            # Lines that parse but cannot be folded (e.g. an edited compactweb_line marker).
            raise TransferRefused(f"the rollout cannot be imported: {exc}", code="invalid_rollout") from None
        raise
    session.refresh_from_db()
    return result


# A big file is read, converted and written this many lines at a time, each batch in its own short transaction
# (constant memory, other writers get in between; issue 13, item 5).
IMPORT_CHUNK_LINES = 5000
IMPORT_PROGRESS = "import_progress"


def import_batch_committed(*, session_id: int, lines_read: int) -> None:
    """A batch of an import is committed (staged): one live progress event per batch, never one per line."""
    publish_transient(session_id=session_id, after_seq=0, kind=IMPORT_PROGRESS, detail={"lines_read": lines_read})


def _publish_imported(session: Session) -> None:
    """One live event for the whole import once it is installed: the new session's summary, its first and last line
    (a page renders everything up to the summary's last seq)."""
    summary = rollout_selectors.session_summary(session=session)
    lines = RolloutLine.objects.filter(session=session).values_list("seq", "kind", "payload")
    ends = {x[0]: x for x in (lines.order_by("seq").first(), lines.order_by("-seq").first()) if x is not None}
    described = [(seq, kind, payload.get("type") if kind == p.EVENT_MSG else None)
                 for seq, kind, payload in (ends[k] for k in sorted(ends))]
    session_id = session.pk
    transaction.on_commit(lambda: rollout_appended.send(
        sender=Session, session_id=session_id, seqs=[x[0] for x in described], lines=described, summary=summary))


def discard_import(*, session_id: int) -> None:
    """Remove everything a failed import staged: its session, staged lines, live items, windows and source file
    lines. The append-only rollout holds nothing of it (lines are installed only in the import's last
    transaction, which rolled back)."""
    with transaction.atomic():
        if RolloutLine.objects.filter(session_id=session_id).exists():
            return  # installed: never delete rollout lines (cannot happen: install and success share one commit)
        CodexSourceLine.objects.filter(source__session_id=session_id).delete()
        CodexSource.objects.filter(session_id=session_id).delete()
        StagedRolloutLine.objects.filter(session_id=session_id).delete()
        LiveItem.objects.filter(session_id=session_id).delete()
        ContextWindow.objects.filter(session_id=session_id).delete()
        Session.objects.filter(pk=session_id).delete()


class _StrictRefusal(Exception):
    """Carries a strict-mode RolloutImportError out of the transaction (which it rolls back)."""

    def __init__(self, error: RolloutImportError) -> None:
        super().__init__(str(error))
        self.error = error


def _line_of(problem: LineProblem) -> int:
    return problem.line_no


def _chunks(lines: Iterable[str | bytes], size: int) -> Iterator[list[str | bytes]]:
    chunk: list[str | bytes] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _strict_errors_in(chunks, *, first_line_no: int, source_name: str) -> Iterator[tuple[int, str]]:
    for chunk in chunks:
        try:
            parse_rollout(chunk, source_name=source_name, strict=True, first_line_no=first_line_no)
        except RolloutImportError as exc:
            yield from exc.errors
        first_line_no += len(chunk)


def _meta_window_id(meta: dict[str, Any], parsed: ParsedRollout) -> str:
    """The session's first window id: Codex 0.169 writes it in session_meta.context_window, older files in their
    first compacted line (if it is in the first chunk); else a new one."""
    given = (meta.get("context_window") or {}).get("window_id") if isinstance(meta.get("context_window"), dict) else None
    if isinstance(given, str) and given:
        return given
    for line in parsed.lines:
        if line.kind == p.COMPACTED and isinstance(line.payload.get("first_window_id"), str):
            return line.payload["first_window_id"]
    return new_window_id()


class _ImportStream:
    """The state of an import read chunk by chunk: the history the conversion needs, labels, counts, the rows
    compactions are built from. Memory: one chunk plus the live history."""

    def __init__(self, *, strict: bool, source_name: str) -> None:
        from collections import Counter

        self.strict, self.source_name = strict, source_name
        self.history: list[Any] = []
        self.carry: list[ImportedLine] = []
        self.labeler = Labeler()
        self.labels: dict[int, Labels] = {}
        self.seq_by_line: dict[int, int] = {}
        self.compaction_rows: list[RolloutLine] = []
        self.kind_counts: Counter[str] = Counter()
        self.skipped_kinds: Counter[str] = Counter()
        self.problems: list[LineProblem] = []
        self.errors: list[tuple[int, str]] = []
        self.rows = 0
        self.legacy_rebuilt = 0
        self.thread_rollbacks = 0
        self.last_timestamp: str | None = None
        self.title: str | None = None
        self.source_lines = 0

    def parse(self, raw: list[RawLine], *, first_line_no: int) -> ParsedRollout:
        try:
            return parse_rollout([r.raw for r in raw], source_name=self.source_name, strict=self.strict,
                                 first_line_no=first_line_no, last_timestamp=self.last_timestamp)
        except RolloutImportError as exc:
            self.errors.extend(exc.errors)
            return ParsedRollout(source_name=self.source_name, lines=[], session_meta=None)

    def feed(self, *, session: Session, source, raw: list[RawLine], parsed: ParsedRollout, actor) -> None:
        self.kind_counts.update(parsed.kind_counts)
        self.skipped_kinds.update(parsed.skipped_kinds)
        self.problems.extend(parsed.problems)
        if parsed.lines:
            self.last_timestamp = parsed.lines[-1].timestamp
        self.labels.update(self.labeler.feed(parsed.lines))
        if self.title is None:
            self.title = title_from_lines(parsed.lines)
        converted, self.history = convert_lines(parsed.lines, history=self.history)
        converted = [*self.carry, *converted]
        # A compactweb rollback exported as `compacted` + marker may straddle two chunks: keep the last one back.
        self.carry = [converted.pop()] if converted and converted[-1].kind == p.COMPACTED and not (
            converted[-1].payload.get("message")) else []
        self._write(session, converted, actor)
        codex_sources.append_source_lines(source=source, raw=raw, seq_by_line=self.seq_by_line,
                                          first_number=self.source_lines + 1)
        self.source_lines += len(raw)
        # Only compactions (and a compacted line carried to the next chunk) need their seq later: memory stays flat.
        keep = set(self.labels) | {x.source_line_no for x in self.carry}
        self.seq_by_line = {no: seq for no, seq in self.seq_by_line.items() if no in keep}

    def _write(self, session: Session, converted: list[ImportedLine], actor) -> None:
        restored = restore_compactweb_kinds(converted)
        self.legacy_rebuilt += sum(1 for x in restored if x.payload.get("legacy_rebuilt"))
        self.thread_rollbacks += sum(1 for x in restored if x.kind == p.ROLLBACK
                                     and x.payload.get("source") in THREAD_ROLLBACK_SOURCES)
        new_lines, numbers, errors, problems = _validated(restored, strict=self.strict)
        self.errors.extend(errors)
        self.problems.extend(problems)
        if self.errors or not new_lines:
            return  # strict and refused: the transaction rolls back at the end; nothing more to write
        rows = append_rollout_lines(session=session, lines=new_lines, actor=actor, staged=True, publish=False)
        self.rows += len(rows)
        self.seq_by_line.update(zip(numbers, (r.seq for r in rows), strict=True))
        self.compaction_rows += [r for r in rows if r.kind in (p.COMPACTED, p.ROLLBACK, p.REDO)]

    def finish(self, *, session: Session, actor) -> None:
        if self.carry:
            self._write(session, self.carry, actor)
            self.carry = []


def _file_name(source_name: str) -> str:
    return (source_name.replace("\\", "/").rsplit("/", 1)[-1] or "rollout.jsonl")[:255]


# --- replay --------------------------------------------------------------------------------------------------------


@dataclass
class ReplayResult:
    replay: Session
    original: Session
    compactions: int = 0
    failures: list[str] = field(default_factory=list)
    turns: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay": self.replay.pk,
            "original": self.original.pk,
            "turns": self.turns,
            "compactions": self.compactions,
            "failures": self.failures,
            "comparison": replay_comparison(replay=self.replay),
        }


def limit_reached(session: Session) -> bool:
    """The pre-turn limit check with the session's provider and policy (spec §2.3, §2.4 step 1b)."""
    provider, policy = session.provider, session.policy
    status = token_status(
        active_tokens=session.tokens_in_window,
        context_window=provider.context_window,
        effective_percent=provider.effective_context_window_percent,
        configured_limit=policy.auto_compact_token_limit,
        scope=policy.auto_compact_scope,
        prefill=session.meter_prefill,
    )
    return status.token_limit_reached


def _drop_summariser_output(pending: list[Any], message: str) -> None:
    """Codex streams a local compaction's summary into the rollout as an assistant message right before the
    `compacted` line (spec §8.1); it is the old policy's work, not a turn's output, so a replay drops it."""
    summary = _strip_prefix(message).strip()
    while summary and pending and is_message(pending[-1], "assistant") and message_text(pending[-1]).strip() == summary:
        pending.pop()


class _Replayer:
    def __init__(self, *, result: ReplayResult, actor, compact: Callable[..., Any]) -> None:
        self.result, self.actor, self.compact = result, actor, compact
        self.pending: list[Any] = []
        self.turn_open = False
        self.compaction_refused = False

    @property
    def session(self) -> Session:
        return self.result.replay

    def flush(self) -> None:
        if self.pending:
            do_append_items(session=self.session, items=self.pending, actor=self.actor)
            self.pending = []

    def start_turn(self) -> None:
        """A new turn begins: record what came before, then the pre-turn check (spec §2.4 step 1b)."""
        self.flush()
        self.result.turns += 1
        session = Session.objects.select_related("provider", "policy").get(pk=self.session.pk)
        if self.compaction_refused or not limit_reached(session):
            return
        try:
            self.compact(session_id=session.pk, actor=self.actor, trigger=Trigger.AUTO, reason=Reason.CONTEXT_LIMIT,
                         phase=Phase.PRE_TURN)
            self.result.compactions += 1
        except CompactionRefused as exc:
            self.compaction_refused = True  # a configuration problem: every later attempt would be refused too
            self.result.failures.append(f"turn {self.result.turns}: refused: {exc}")
        except (CompactionFailed, CompactionInterrupted, SessionBusy, LeaseLost) as exc:
            self.result.failures.append(f"turn {self.result.turns}: {exc}")
        self.session.refresh_from_db()

    def feed(self, line: p.Line) -> None:
        kind, payload = line.kind, line.payload
        if kind == p.RESPONSE_ITEM:
            if is_real_user_message(payload) and not self.turn_open:
                self.start_turn()
            self.turn_open = False
            self.pending.append(payload)
        elif kind == p.EVENT_MSG and payload.get("type") in TURN_STARTED_EVENTS:
            self.start_turn()
            self.turn_open = True
        elif kind == p.TURN_CONTEXT:
            self.flush()
            append_rollout_lines(session=self.session, lines=[NewLine(p.TURN_CONTEXT, payload)], actor=self.actor)
        elif kind == p.COMPACTED:
            _drop_summariser_output(self.pending, payload.get("message") or "")
        elif kind == p.EVENT_MSG and payload.get("type") in PIN_EVENTS:
            # Pinned context belongs to the conversation, not to the original's policy: the replay keeps it, so its
            # own compactions re-inject and check the same pins.
            self.flush()
            append_rollout_lines(session=self.session, lines=[NewLine(p.EVENT_MSG, payload)], actor=self.actor)
        elif kind == p.ROLLBACK and payload.get("source") in THREAD_ROLLBACK_SOURCES:
            self.flush()
            history = list(self.session.live_items.order_by("position").values_list("item", flat=True))
            try:
                new, _ = thread_rollback_line(history=history, num_turns=int(payload.get("num_turns") or 0),
                                              actor=self.actor, reason="replayed thread rollback")
            except (RollbackRefused, ValueError):
                return  # nothing to cut in the replay's history
            append_rollout_lines(session=self.session, lines=[new], actor=self.actor)
        # Everything else is the original policy's or operator's work (its compactions, compaction rollbacks and
        # redos, server usage of a different context) and is not replayed.


def do_replay_session(
    *,
    session_id: int,
    policy: CompactionPolicy,
    provider: Provider | None = None,
    title: str | None = None,
    actor=None,
    compact: Callable[..., Any] | None = None,
) -> ReplayResult:
    """Replay a session under another policy (and optionally provider) as a new session (source "replay",
    origin = the original): its response items in order, its turn contexts and thread rollbacks, with the new
    policy's pre-turn auto compaction between turns (spec §2.4 step 1b). Compaction failures are recorded on the
    replay and listed; the replay goes on. `compact` defaults to sessions_app.compactions.services.do_compact_session."""
    if compact is None:
        compact = do_compact_session
    original = Session.objects.select_related("provider", "policy").get(pk=session_id)
    provider = provider or original.provider
    replay = do_create_session(
        title=(title or f"{original.title} · replay under {policy.name}")[:200], provider=provider, policy=policy,
        base_instructions=original.base_instructions, actor=actor,
    )
    # The original's initial context is in its rollout and is replayed with the rest; kept on the row so the
    # replay's compactions re-inject it like the original's would.
    Session.objects.filter(pk=replay.pk).update(origin=original, source=REPLAY, initial_context=original.initial_context)
    replay.refresh_from_db()
    result = ReplayResult(replay=replay, original=original)
    replayer = _Replayer(result=result, actor=actor, compact=compact)
    try:
        for line in _fold_lines(original.pk):
            if line.kind != p.SESSION_META:
                replayer.feed(line)
        replayer.flush()
    except Exception:
        Session.objects.filter(pk=replay.pk).update(state=Session.State.FAILED)
        raise
    replay.refresh_from_db()
    record_audit(
        action=AuditEntry.Action.REPLAY, actor=actor, session=replay,
        reason=f"replay of session {original.pk} under policy {policy.name}",
        detail={"original": original.pk, "policy": policy.pk, "provider": provider.pk, "turns": result.turns,
                "compactions": result.compactions, "failures": result.failures},
    )
    return result

