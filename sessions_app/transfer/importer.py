"""Codex rollout import (spec §8.2, §15; design user story 7).

Import is all or nothing: the file is parsed and every line validated before anything is written (a bad line is
reported with its 1-based number and nothing is stored), then the session, its rollout and its Compaction rows are
written. A `compacted` line plus a `compactweb_line` marker event (how the export writes compactweb-only lines)
is turned back into the original line, so export then import gives the same live history and the same
rolled-back compactions."""

from __future__ import annotations

import dataclasses
import itertools
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from uuid6 import uuid7

from compaction_app import records
from compaction_app.audit import record_audit
from compaction_app.config_services import derived_provider
from compaction_app.engine.items import is_real_user_message, message_text
from compaction_app.engine.vocabulary import Phase
from compaction_app.engine.windows import new_window_id
from compaction_app.models import AuditEntry, Compaction, CompactionPolicy, Provider
from sessions_app.claude_transcript import (
    COST_STATE_USAGE,
    EPOCH,
    TranscriptChunk,
    TranscriptReader,
    looks_like_claude_transcript,
)
from sessions_app.claude_transcript.windows import model_context_window
from sessions_app.codex_rollout import (
    ImportedLine,
    ParsedRollout,
    RolloutImportError,
    parse_rollout,
)
from sessions_app.codex_rollout.convert import convert_lines
from sessions_app.codex_rollout.export import COMPACTWEB_EVENT
from sessions_app.codex_rollout.labels import Labeler, Labels, implementation_of
from sessions_app.codex_rollout.parse import (
    EXTRA_INSTRUCTIONS,
    REPAIRED,
    SKIPPED,
    LineProblem,
    RawLine,
    missing_meta_reason,
    split_raw_lines,
)
from sessions_app.codex_rollout.turn_rollback import ThreadRollbackError
from sessions_app.compactions.label_lines import labels_by_seq
from sessions_app.compactions.rollback import (
    compaction_key,
    fold_compaction_states,
)
from sessions_app.compactions.tasks import score_in_background
from sessions_app.compactions.usage_lines import REREAD_USAGE, add_reread_lines, usage_after
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
from sessions_app.rollout.lease import IMPORTING_SOURCE
from sessions_app.rollout.services import (
    NewLine,
    announce_committed,
    append_rollout_lines,
    install_staged_lines,
)
from sessions_app.rollout.validation import ItemValidationError, validate_item, validate_items
from sessions_app.transfer import codex_sources
from sessions_app.transfer.figures import measure_rollout
from sessions_app.transfer.lines import THREAD_ROLLBACK_SOURCES, fold_lines, strip_summary_prefix
from sessions_app.transfer.refusals import AlreadyImported, TransferRefused

IMPORTED = "imported"
FOLLOWED = "followed"
IMPORTING = IMPORTING_SOURCE  # an import in progress: read-only, replaced by IMPORTED/FOLLOWED when it lands


# Kinds a `compactweb_line` marker event restores on import (see sessions_app.codex_rollout.export).
_RESTORABLE_WITH_HISTORY = frozenset({p.ROLLBACK, p.REDO})
_RESTORABLE_ALONE = frozenset({p.WINDOW_OPENED})


def restore_compactweb_kinds(lines: list[ImportedLine]) -> list[ImportedLine]:
    """Undo the export's mapping of compactweb-only kinds: a `compacted` line with an empty message followed by a
    `compactweb_line` event for a rollback or redo becomes that line again (the event's payload plus the
    replacement history), a `compacted` line followed by one of kind `compacted` gets back its compactweb-only
    field (the operator's extra instructions), and a lone marker for a `window_opened` line becomes that line.
    Other lines pass."""
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
        if line.kind == p.COMPACTED and marker is not None and marker["kind"] == p.COMPACTED:
            extra = marker["payload"].get(EXTRA_INSTRUCTIONS)
            payload = {**line.payload, EXTRA_INSTRUCTIONS: extra} if isinstance(extra, str) and extra else line.payload
            out.append(ImportedLine(line.kind, payload, line.timestamp, line.source_line_no))
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


def validated_lines(lines: list[ImportedLine], *, strict: bool = True
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


def _thread_id_and_time(parsed: ParsedRollout, raw: list[RawLine]) -> tuple[uuid.UUID, datetime]:
    """The thread id and start time from the first session_meta line, which every Codex rollout starts with."""
    meta_line = next((line for line in parsed.lines if line.kind == p.SESSION_META), None)
    if meta_line is None:
        raise RolloutImportError([(1, missing_meta_reason(raw))], source_name=parsed.source_name)
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
# A title says how the session came (issue 47 item 8): an uploaded file is "imported", a file kept in step with its
# writer "followed"; a gateway session names its client and route, a simulated one its scenario.
IMPORTED_TITLE = "imported"
FOLLOWED_TITLE = "followed"


def titled(prompt: str | None, *, kind: str = IMPORTED_TITLE) -> str | None:
    """`<kind>: <prompt>` (the first real prompt), or None without one."""
    return f"{kind}: {prompt}" if prompt else None


def title_from_lines(lines, *, kind: str = IMPORTED_TITLE) -> str | None:
    """`<kind>: <the first real user message>`, or None when the lines have none yet."""
    for line in lines:
        try:
            if line.kind == p.RESPONSE_ITEM and is_real_user_message(line.payload):
                text = " ".join(message_text(line.payload).split())
                if text:
                    return titled(text[:80], kind=kind)
        except (AttributeError, TypeError):  # a malformed item, reported by validation
            continue
    return None


def _untitled(source_name: str | None) -> str:
    return f"{UNTITLED_PREFIX} {source_name or ''}".strip()[:200]


def create_compactions(session: Session, rows: list[RolloutLine], labels: dict[int, Labels] | None = None, *,
                       live: bool = False) -> int:
    """Compaction rows for the `compacted` lines among `rows`, labelled as Codex ran them (`labels` by seq,
    inferred from the rollout; sessions_app.codex_rollout.labels). Not `live` (an import, a follower's first read
    of a file), they are history: never counted toward a live storm."""
    compacted = [r for r in rows if r.kind == p.COMPACTED]
    if not compacted:
        return 0
    labels = labels or {}
    figures = {c.seq: c for c in measure_rollout(fold_lines(session.pk)).compactions}
    costs = usage_after(session_id=session.pk, compacted_seqs=[r.seq for r in compacted])
    states = fold_compaction_states((r.seq, r.kind, r.payload) for r in rows)
    # What the rollout itself says the labels are (a gateway session's `compaction_labels` lines) over what its
    # turns suggest: a Claude Code session through the gateway has no turns to infer them from.
    written = labels_by_seq(session_id=session.pk, compacted={
        r.seq: (str(r.payload.get("window_id") or ""), int(r.payload.get("window_number") or 0)) for r in compacted})
    created = []
    for row in compacted:
        payload, fig = row.payload, figures[row.seq]
        label = labels.get(row.seq)
        if label is None:
            (implementation, strategy), why = implementation_of(payload)
            label = Labels(implementation=implementation, strategy=strategy, phase=Phase.PRE_TURN, trigger="auto",
                           reason="context_limit", inferred={"implementation": why})
        if row.seq in written:
            said = written[row.seq]
            label = dataclasses.replace(label, trigger=said["trigger"], reason=said["reason"], phase=said["phase"],
                                        inferred={**label.inferred, **said["inferred"]})
        key = compaction_key(window_id=payload.get("window_id"), seq=row.seq)
        created.append(Compaction(
            session=session, rollout_seq=row.seq, trigger=label.trigger, reason=label.reason, phase=label.phase,
            implementation=label.implementation, strategy=label.strategy,
            summary=strip_summary_prefix(payload.get("message") or ""),
            tokens_before=fig.active_before, tokens_after=fig.active_after,
            window_number=int(payload.get("window_number") or 0), window_id=payload.get("window_id") or "",
            previous_window_id=payload.get("previous_window_id") or "",
            first_window_id=payload.get("first_window_id") or "", item_id=f"imported-{row.seq}",
            rolled_back=states[key].rolled_back if key in states else False,
            extra_instructions=str(payload.get(EXTRA_INSTRUCTIONS) or ""),
            inferred=dict(label.inferred), history=not live, **costs[row.seq],
        ))
    count = records.record_imported_compactions(compactions=created)
    # The re-read tax written after these compactions (usage_lines.REREAD_USAGE), now that they exist: among the
    # appended rows for a follower, every such line of the rollout for an import.
    add_reread_lines(session_id=session.pk, rows=rows if live else list(RolloutLine.objects.filter(
        session_id=session.pk, kind=p.EVENT_MSG, payload__type=REREAD_USAGE).order_by("seq")))
    score_in_background(session_id=session.pk)
    return count


def record_claude_call_tokens(session: Session, payloads: Iterable[dict[str, Any]]) -> None:
    """The call tokens of a Claude Code session's compactions, from the `compaction_usage` lines the reader wrote
    at each `cost-state` (sessions_app.claude_transcript.convert), matched by window number."""
    spent = {x["window_number"]: x["info"]["last_token_usage"]["total_tokens"] for x in payloads
             if x.get("type") == p.COMPACTION_USAGE and x.get("source") == COST_STATE_USAGE}
    if not spent:
        return
    done: set[int] = set()
    for pk, window in (Compaction.objects.filter(session=session, window_number__in=list(spent))
                       .order_by("rollout_seq").values_list("pk", "window_number")):
        if window not in done:
            done.add(window)
            records.set_call_tokens(compaction_id=pk, tokens=spent[window])


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


def provider_for_claude_model(provider: Provider, model: str | None) -> Provider:
    """The provider with the Claude model's own window and name (Claude Code writes no window into a transcript:
    sessions_app.claude_transcript.windows); `provider` itself for a model name that is not Claude's."""
    window = model_context_window(model)
    if window is None:
        return provider
    return derived_provider(provider, model=model, context_window=window)


@dataclass(frozen=True, kw_only=True)
class FollowedFile:
    """A file the import goes on following (a local follow or a shipped file): its CodexSource `path`, the read
    `state` stored with the import's last transaction, and the session a rewritten file was followed as before."""

    path: str
    state: dict[str, Any]
    continues: Session | None = None


@dataclass
class _Header:
    """The first batch of a file, read: the stream that goes on reading it and what the session starts from."""

    stream: _ImportStream
    raw: list[RawLine]
    parsed: ParsedRollout
    original_id: uuid.UUID
    meta_time: datetime
    meta: dict[str, Any]
    meta_line_no: int
    window_id: str


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
    followed: FollowedFile | None = None,
) -> ImportResult:
    """Import one Codex rollout as a new session (source "imported", or "followed" with `followed`), all or
    nothing in the database (spec §15, §8.2; issue 13).

    Tolerant by default, like Codex's own loader: unparseable lines (a truncated last line), unknown kinds and
    items, NUL characters and bad timestamps are skipped or repaired and reported in `problems` with their line
    numbers. `strict` refuses the whole file instead (RolloutImportError naming every bad line). The file's
    lines are kept as they came (sessions_app.transfer.codex_sources), so an export gives them back byte for byte.
    Compactions are labelled from the rollout (sessions_app.codex_rollout.labels) and the session gets the
    context window Codex reported. Raises AlreadyImported when a session with the rollout's thread id exists
    (unless `new_thread_id`, which imports under a fresh id and keeps the original as `forked_from_id`),
    TransferRefused when no provider or policy is configured. A followed file's read state (`followed.state`: the
    CodexSource fields offset, head, tail, inode) is stored in the import's last transaction; `followed.continues` links
    the new session to the one a rewritten file was followed as before (issue 30): 

    Big files (issue 13, item 5): the file is read and written IMPORT_CHUNK_LINES lines at a time, each batch in
    its own short transaction, into a staging table (StagedRolloutLine; the session is read-only, source
    "importing", meanwhile), so other writers get the database between batches. The last short transaction
    installs the staged lines into the append-only rollout with one INSERT ... SELECT, with the compactions and
    the audit entry; a failure anywhere removes the session and everything staged (`discard_import`), so an
    import lands whole or leaves nothing. Live events: one progress event per batch and one lines event.
    """
    chunks = _chunks(lines, IMPORT_CHUNK_LINES)
    header = _read_header(next(chunks, []), chunks, strict=strict, source_name=source_name)
    if followed is not None:
        header.stream.title_kind = FOLLOWED_TITLE
    provider, policy = default_provider_and_policy(provider, policy)
    if isinstance(header.stream, _ClaudeImportStream):
        # The model's own window from the first line on, so every window opens with its limit (the chart's).
        provider = provider_for_claude_model(provider, header.stream.reader.meta.model)
    thread_id = uuid.UUID(int=uuid7().int) if new_thread_id else header.original_id
    existing = Session.objects.filter(thread_id=thread_id).values_list("pk", flat=True).first()
    if existing is not None:
        raise AlreadyImported(thread_id=str(thread_id), session_id=existing)
    meta_payload = {
        **header.meta,
        "id": str(thread_id),
        "model": header.meta.get("model") or provider.model,
        "window_number": 0,
        "window_id": header.window_id,
        "first_window_id": header.window_id,
    }
    if new_thread_id:
        meta_payload["forked_from_id"] = str(header.original_id)
    session, source = _start_session(header, meta_payload, thread_id=thread_id, title=title, provider=provider,
                                     policy=policy, actor=actor, source_name=source_name, followed=followed)
    try:
        _stage(header, chunks, session=session, source=source, actor=actor)
        # The last short transaction: install the staged lines into the rollout, then the compactions and labels.
        with transaction.atomic():
            result = _install(header.stream, session=session, source=source, provider=provider, title=title,
                              actor=actor, source_name=source_name, strict=strict, followed=followed)
    except BaseException as exc:
        discard_import(session_id=session.pk)
        if isinstance(exc, _StrictRefusal):
            raise exc.error from None
        if isinstance(exc, BAD_FILE_ERRORS):
            # Lines that parse but cannot be folded (e.g. an edited compactweb_line marker). Any other error,
            # a ValueError of our own code included, is a bug: it is raised as it is, not blamed on the file.
            raise TransferRefused(f"the rollout cannot be imported: {exc}", code="invalid_rollout") from None
        raise
    session.refresh_from_db()
    return result


def _read_header(first_chunk: list[str | bytes], chunks: Iterator[list[str | bytes]], *, strict: bool,
                 source_name: str) -> _Header:
    """Read the file's first batch: a Codex rollout or a Claude Code transcript, its thread id, time and meta. A
    strict import of a bad file is refused here, naming every bad line of the whole file."""
    raw = split_raw_lines(first_chunk)
    if looks_like_claude_transcript(first_chunk):
        # A Claude Code transcript (issue 35): same staging, source lines and export, its own reader.
        stream: _ImportStream = _ClaudeImportStream(strict=strict, source_name=source_name)
        parsed = stream.parse(raw, first_line_no=1)
        if stream.errors:
            raise RolloutImportError(
                [*stream.errors, *_claude_strict_errors_in(chunks, first_line_no=len(raw) + 1)],
                source_name=source_name)
        original_id, meta_time, meta, meta_line_no = stream.header(parsed)
        return _Header(stream=stream, raw=raw, parsed=parsed, original_id=original_id, meta_time=meta_time,
                       meta=meta, meta_line_no=meta_line_no, window_id=meta["context_window"]["window_id"])
    try:
        parsed = parse_rollout([r.raw for r in raw], source_name=source_name, strict=strict)
    except RolloutImportError as exc:
        # Strict: name every bad line of the whole file, as the unchunked reader did.
        errors = [*exc.errors, *_strict_errors_in(chunks, first_line_no=len(raw) + 1, source_name=source_name)]
        raise RolloutImportError(errors, source_name=source_name) from None
    original_id, meta_time = _thread_id_and_time(parsed, raw)
    meta = dict(parsed.session_meta or {})
    return _Header(
        stream=_ImportStream(strict=strict, source_name=source_name), raw=raw, parsed=parsed,
        original_id=original_id, meta_time=meta_time, meta=meta,
        meta_line_no=next(line.line_no for line in parsed.lines if line.kind == p.SESSION_META),
        window_id=_meta_window_id(meta, parsed),
    )


def _start_session(header: _Header, meta_payload: dict[str, Any], *, thread_id: uuid.UUID, title: str | None,
                   provider: Provider, policy: CompactionPolicy, actor, source_name: str,
                   followed: FollowedFile | None) -> tuple[Session, CodexSource]:
    """Short transaction 1: the session (read-only while it imports: source "importing"), its first line staged,
    and its CodexSource. AlreadyImported when another import of the same thread won the race."""
    try:
        with transaction.atomic():
            session = Session.objects.create(
                title=header.stream.first_title(header.parsed, title), provider=provider, policy=policy,
                base_instructions=_base_text(header.meta), thread_id=thread_id, model=provider.model,
                source=IMPORTING,
            )
            meta_rows = append_rollout_lines(
                session=session, lines=[NewLine(p.SESSION_META, meta_payload, header.meta_time)], actor=actor,
                staged=True, publish=False)
            source = codex_sources.store_source(
                session=session, name=_file_name(source_name), raw=[], seq_by_line={}, problems=[],
                path=followed.path if followed is not None else "",
            )
            if followed is not None and followed.continues is not None:
                CodexSource.objects.filter(pk=source.pk).update(continues=followed.continues)
    except IntegrityError:
        # Another import of the same thread won the race for the unique thread id.
        existing = Session.objects.filter(thread_id=thread_id).values_list("pk", flat=True).first()
        if existing is None:
            raise
        raise AlreadyImported(thread_id=str(thread_id), session_id=existing) from None
    header.stream.seq_by_line[header.meta_line_no] = meta_rows[0].seq
    return session, source


def _stage(header: _Header, chunks: Iterator[list[str | bytes]], *, session: Session, source: CodexSource,
           actor) -> None:
    """One short transaction per batch of lines, staged (not yet in the append-only rollout): other writers get
    the database between batches."""
    stream = header.stream
    with transaction.atomic():
        stream.feed(session=session, source=source, raw=header.raw, parsed=header.parsed, actor=actor)
    import_batch_committed(session_id=session.pk, lines_read=stream.source_lines)
    next_no = len(header.raw) + 1
    for chunk in chunks:
        raw = split_raw_lines(chunk)
        with transaction.atomic():
            parsed = stream.parse(raw, first_line_no=next_no)
            stream.feed(session=session, source=source, raw=raw, parsed=parsed, actor=actor)
        import_batch_committed(session_id=session.pk, lines_read=stream.source_lines)
        next_no += len(raw)


def _install(stream: _ImportStream, *, session: Session, source: CodexSource, provider: Provider,
             title: str | None, actor, source_name: str, strict: bool,
             followed: FollowedFile | None) -> ImportResult:
    """Install the staged lines into the rollout, then the session's final source, provider and title, the
    compactions with their labels and the audit entry (inside the import's last transaction)."""
    stream.finish(session=session, actor=actor)
    if stream.errors:
        raise _StrictRefusal(RolloutImportError(stream.errors, source_name=source_name))
    install_staged_lines(session_id=session.pk)
    window = stream.window
    problems = sorted(stream.problems, key=_line_of)
    CodexSource.objects.filter(pk=source.pk).update(
        context_window=window, problems=[x.as_dict() for x in problems], updated_at=timezone.now(),
        **(followed.state if followed is not None else {}))
    chosen = (provider_for_claude_model(provider, stream.reader.meta.model)
              if isinstance(stream, _ClaudeImportStream) else provider_for_window(provider, window))
    updates = {"provider": chosen,
               "source": FOLLOWED if followed is not None else IMPORTED}
    if not title and session.title.startswith(UNTITLED_PREFIX) and stream.title:
        updates["title"] = stream.title
    Session.objects.filter(pk=session.pk).update(**updates)
    labels = {stream.seq_by_line[no]: label for no, label in stream.labels.items() if no in stream.seq_by_line}
    result = ImportResult(
        session=session,
        source_name=source_name,
        lines_read=sum(stream.kind_counts.values()),
        lines_imported=stream.rows + 1,
        kind_counts=dict(stream.kind_counts),
        skipped_kinds=dict(stream.skipped_kinds),
        compactions=create_compactions(session, stream.compaction_rows, labels),
        legacy_compactions_rebuilt=stream.legacy_rebuilt,
        thread_rollbacks=stream.thread_rollbacks,
        problems=problems,
        strict=strict,
    )
    if isinstance(stream, _ClaudeImportStream):
        record_claude_call_tokens(session, RolloutLine.objects.filter(
            session=session, kind=p.EVENT_MSG, payload__type=p.COMPACTION_USAGE,
        ).values_list("payload", flat=True))
    record_audit(
        action=AuditEntry.Action.IMPORT, actor=actor, session=session,
        reason=f"imported {source_name or 'a rollout'}",
        detail={k: v for k, v in result.as_dict().items() if k not in ("session", "problems")},
    )
    session.refresh_from_db()
    _publish_imported(session)
    return result


# What a file that parses can still be refused for once it is folded and validated: the file's fault, a 400.
BAD_FILE_ERRORS = (p.ProjectionError, ItemValidationError, ThreadRollbackError)

# A big file is read, converted and written this many lines at a time, each batch in its own short transaction
# (constant memory, other writers get in between; issue 13, item 5). 1,000 rather than 5,000: the batch's parsed
# and converted lines were about 40 MB of the process's peak, and smaller batches were no slower (issue 30,
# measured with bench/bench_import.py on the whole `import_rollouts` process).
IMPORT_CHUNK_LINES = 1000
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
    transaction.on_commit(lambda: announce_committed(session_id=session_id, summary=summary, lines=described))


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
        self.title_kind = IMPORTED_TITLE  # FOLLOWED_TITLE for a followed file (do_import_rollout)
        self.source_lines = 0

    def parse(self, raw: list[RawLine], *, first_line_no: int) -> ParsedRollout:
        try:
            return parse_rollout([r.raw for r in raw], source_name=self.source_name, strict=self.strict,
                                 first_line_no=first_line_no, last_timestamp=self.last_timestamp)
        except RolloutImportError as exc:
            self.errors.extend(exc.errors)
            return ParsedRollout(source_name=self.source_name, lines=[], session_meta=None)

    @property
    def window(self) -> int | None:
        return self.labeler.window

    def first_title(self, parsed: ParsedRollout, given: str | None) -> str:
        if given:
            return given[:200]
        return title_from_lines(parsed.lines, kind=self.title_kind) or _untitled(parsed.source_name)

    def feed(self, *, session: Session, source, raw: list[RawLine], parsed: ParsedRollout, actor) -> None:
        self.kind_counts.update(parsed.kind_counts)
        self.skipped_kinds.update(parsed.skipped_kinds)
        self.problems.extend(parsed.problems)
        if parsed.lines:
            self.last_timestamp = parsed.lines[-1].timestamp
        self.labels.update(self.labeler.feed(parsed.lines))
        if self.title is None:
            self.title = title_from_lines(parsed.lines, kind=self.title_kind)
        converted, self.history = convert_lines(parsed.lines, history=self.history)
        self._take(session=session, source=source, raw=raw, converted=converted, actor=actor)

    def _take(self, *, session: Session, source, raw: list[RawLine], converted: list[ImportedLine], actor) -> None:
        """Write a batch's converted lines (staged) and keep its file lines."""
        converted = [*self.carry, *converted]
        # A compactweb rollback, or a compaction with extra instructions, exported as `compacted` + marker may
        # straddle two chunks: keep a last `compacted` line back.
        self.carry = [converted.pop()] if converted and converted[-1].kind == p.COMPACTED else []
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
        new_lines, numbers, errors, problems = validated_lines(restored, strict=self.strict)
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


class _ClaudeImportStream(_ImportStream):
    """The import of a Claude Code transcript (sessions_app.claude_transcript): its reader keeps the conversation
    tree across batches; staging, kept file lines and compactions are the Codex import's."""

    def __init__(self, *, strict: bool, source_name: str) -> None:
        super().__init__(strict=strict, source_name=source_name)
        self.reader = TranscriptReader()

    @property
    def window(self) -> int | None:
        return None  # Claude Code does not write the model's context window into its transcript

    def first_title(self, parsed: TranscriptChunk, given: str | None) -> str:
        if given:
            return given[:200]
        return titled(self.reader.first_prompt, kind=self.title_kind) or _untitled(self.source_name)

    def parse(self, raw: list[RawLine], *, first_line_no: int) -> TranscriptChunk:
        chunk = self.reader.feed([r.raw for r in raw], first_line_no=first_line_no)
        if self.strict:
            self.errors.extend((x.line_no, x.reason) for x in chunk.problems)
        return chunk

    def header(self, parsed: TranscriptChunk) -> tuple[uuid.UUID, datetime, dict[str, Any], int]:
        """(session id, start, session_meta payload, the line it is tied to) from the transcript's first entries."""
        meta = self.reader.meta
        if meta.session_id is None:
            raise RolloutImportError([(1, "the transcript names no sessionId in its first lines")],
                                     source_name=self.source_name)
        try:
            thread_id = uuid.UUID(meta.session_id)
        except ValueError:
            raise RolloutImportError([(1, f"sessionId {meta.session_id[:60]!r} is not a UUID")],
                                     source_name=self.source_name) from None
        try:
            started = _parse_time(meta.started or EPOCH)
        except ValueError:
            started = _parse_time(EPOCH)
        first_line = min((line.source_line_no for line in parsed.lines), default=1)
        payload = {**meta.session_meta(), "context_window": {"window_id": self.reader.first_window_id}}
        return thread_id, started, payload, first_line

    def feed(self, *, session: Session, source, raw: list[RawLine], parsed: TranscriptChunk, actor) -> None:
        self.kind_counts.update(parsed.kind_counts)
        self.problems.extend(parsed.problems)
        self.labels.update(parsed.labels)
        self.title = self.title or titled(self.reader.first_prompt, kind=self.title_kind)
        self._take(session=session, source=source, raw=raw, converted=parsed.lines, actor=actor)


def _claude_strict_errors_in(chunks, *, first_line_no: int) -> list[tuple[int, str]]:
    errors = []
    reader = TranscriptReader()
    for chunk in chunks:
        errors += [(x.line_no, x.reason) for x in reader.feed(chunk, first_line_no=first_line_no).problems]
        first_line_no += len(chunk)
    return errors


def _file_name(source_name: str) -> str:
    return (source_name.replace("\\", "/").rsplit("/", 1)[-1] or "rollout.jsonl")[:255]
