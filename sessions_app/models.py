"""Sessions, their append-only rollout, context windows and the cached live history.

The rollout is the truth. Session's live fields and LiveItem rows are a cache of the fold in
`sessions_app.rollout.projection`, always derivable from the rollout (`services.verify_projection` checks it).
"""

from __future__ import annotations

import dataclasses

from django.conf import settings
from django.db import models

from compaction_app.engine import meter as m
from compaction_app.engine.pins import PIN_EVENTS
from sessions_app.rollout.projection import EVENT_MSG, LINE_KINDS, Header


class AppendOnlyError(RuntimeError):
    """Rollout lines are never updated or deleted."""


# The session row caches the meter as one meter_<field> column per MeterState field: Session.meter and set_header
# copy them by name, so a new meter field needs only its column.
METER_COLUMNS = {f"meter_{f.name}": f.name for f in dataclasses.fields(m.MeterState)}


class Session(models.Model):
    class State(models.TextChoices):
        IDLE = "idle", "idle"
        RUNNING = "running", "running"
        PAUSED = "paused", "paused"
        STOPPED = "stopped", "stopped"
        FAILED = "failed", "failed"

    title = models.CharField(max_length=200)
    provider = models.ForeignKey("compaction_app.Provider", on_delete=models.PROTECT, related_name="sessions")
    policy = models.ForeignKey("compaction_app.CompactionPolicy", on_delete=models.PROTECT, related_name="sessions")
    base_instructions = models.TextField(blank=True, help_text="The model's base instructions (spec §3.1).")
    initial_context = models.JSONField(
        default=list, blank=True, help_text="Items injected as the turn's full context (spec §5.3)."
    )
    tools = models.JSONField(
        default=list, blank=True,
        help_text="The request's tool specs (Responses `tools`), sent by every turn and remote compaction (§13).",
    )
    parallel_tool_calls = models.BooleanField(default=False, help_text="Sent with the tools (§13).")
    state = models.CharField(max_length=16, choices=State.choices, default=State.IDLE)
    thread_id = models.UUIDField(unique=True, help_text="A UUIDv7, as Codex's thread id.")
    model = models.CharField(max_length=200, help_text="Model used by the latest turn (previous-model check, §2.4).")
    fault_injection = models.JSONField(
        default=dict, blank=True, help_text="Per-session simulated-provider faults (empty = none)."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    origin = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="replays",
        help_text="For a replay: the (usually imported) session it replays under another policy.",
    )
    source = models.CharField(
        max_length=16,
        default="native",
        help_text="native (created here), imported (from a Codex rollout) or replay (of another session).",
    )

    # One writer at a time: a lease taken by a compaction, a turn or a rollback (sessions_app.rollout.lease).
    lease_holder = models.CharField(max_length=64, blank=True)
    lease_purpose = models.CharField(max_length=32, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    # Cached live state: the O(1) header of the projection fold (sessions_app.rollout.projection.Header).
    window_number = models.PositiveIntegerField(default=0)
    window_id = models.CharField(max_length=64, blank=True)
    previous_window_id = models.CharField(max_length=64, blank=True)
    first_window_id = models.CharField(max_length=64, blank=True)
    last_seq = models.PositiveBigIntegerField(default=0)
    compaction_count = models.PositiveIntegerField(default=0)
    reference_context_set = models.BooleanField(
        default=False, help_text="Whether the current baseline context is installed (cleared by compaction, §5.3)."
    )
    live_item_count = models.PositiveIntegerField(default=0)
    meter_usage_total = models.BigIntegerField(default=0)
    meter_since_model = models.BigIntegerField(default=0)
    meter_reasoning_before_user = models.BigIntegerField(default=0)
    meter_reasoning_after_user = models.BigIntegerField(default=0)
    meter_reasoning_included = models.BooleanField(default=False)
    meter_history_tokens = models.BigIntegerField(default=0)
    meter_base_tokens = models.BigIntegerField(default=0)
    meter_prefill = models.BigIntegerField(null=True, blank=True)
    meter_prefill_source = models.CharField(max_length=16, blank=True)

    HEADER_FIELDS = (
        "window_number", "window_id", "previous_window_id", "first_window_id", "last_seq", "compaction_count",
        "reference_context_set", "live_item_count", "model", *METER_COLUMNS,
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        # The session list (newest first, keyset pages) and the fleet's newest/oldest sorts, with or without a
        # state, read an index range instead of sorting every session (issue 34: a year of sessions).
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="session_newest"),
            models.Index(fields=["state", "-created_at", "-id"], name="session_state_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.title} (#{self.pk})"

    @property
    def meter(self) -> m.MeterState:
        return m.MeterState(**{name: getattr(self, column) for column, name in METER_COLUMNS.items()})

    @property
    def tokens_in_window(self) -> int:
        """The window's active tokens (spec §3.2), read in O(1)."""
        return m.active_total(self.meter)

    @property
    def header(self) -> Header:
        return Header(
            meter=self.meter,
            window_number=self.window_number,
            window_id=self.window_id,
            previous_window_id=self.previous_window_id,
            first_window_id=self.first_window_id,
            last_seq=self.last_seq,
            compaction_count=self.compaction_count,
            reference_context_set=self.reference_context_set,
            model=self.model,
            item_count=self.live_item_count,
        )

    def set_header(self, header: Header) -> None:
        """Copy a projection header onto the row's cached fields (the caller saves)."""
        self.window_number = header.window_number
        self.window_id = header.window_id
        self.previous_window_id = header.previous_window_id
        self.first_window_id = header.first_window_id
        self.last_seq = header.last_seq
        self.compaction_count = header.compaction_count
        self.reference_context_set = header.reference_context_set
        self.live_item_count = header.item_count
        self.model = header.model
        for column, name in METER_COLUMNS.items():
            setattr(self, column, getattr(header.meter, name))


class RolloutLineQuerySet(models.QuerySet):
    """Rollout lines can be read and inserted, never changed: every bulk write path raises."""

    def update(self, **kwargs):
        raise AppendOnlyError("rollout lines are append-only: update() is refused")

    def delete(self):
        raise AppendOnlyError("rollout lines are append-only: delete() is refused")

    def bulk_update(self, objs, fields, batch_size=None):
        raise AppendOnlyError("rollout lines are append-only: bulk_update() is refused")

    def update_or_create(self, defaults=None, create_defaults=None, **kwargs):
        raise AppendOnlyError("rollout lines are append-only: update_or_create() is refused")

    def _raw_delete(self, using):
        raise AppendOnlyError("rollout lines are append-only: delete is refused")

    _raw_delete.queryset_only = True


class RolloutLine(models.Model):
    """One line of a session's append-only rollout, in Codex's line kinds (spec §15) plus ours (rollback, ...)."""

    KIND_CHOICES = [(k, k) for k in LINE_KINDS]

    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="rollout_lines")
    seq = models.PositiveBigIntegerField(help_text="Per-session sequence number, from 1.")
    timestamp = models.DateTimeField()
    kind = models.CharField(max_length=32, choices=KIND_CHOICES)
    payload = models.JSONField()
    tokens = models.PositiveBigIntegerField(
        default=0,
        help_text="Stored token count: the item of a response_item, the base instructions of a session_meta, "
        "the sum of item_tokens of a line that installs a history; 0 otherwise.",
    )
    item_tokens = models.JSONField(
        null=True, blank=True, help_text="One stored count per replacement_history item (compacted, rollback, redo)."
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = RolloutLineQuerySet.as_manager()

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="rolloutline_unique_seq")]
        # The pins in force are a fold over a session's few pin lines (sessions_app.compactions.retention), read by
        # every session page and every compaction: a partial index holds just those lines, so the read does not
        # walk a long session's whole rollout (issue 34).
        indexes = [
            models.Index(fields=["session", "seq"], name="rolloutline_pin_events",
                         condition=models.Q(kind=EVENT_MSG, payload__type__in=PIN_EVENTS)),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError("rollout lines are append-only: an existing line cannot be saved again")
        kwargs["force_insert"] = True
        kwargs.pop("force_update", None)
        kwargs.pop("update_fields", None)
        return super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("rollout lines are append-only: delete() is refused")

    def as_codex_line(self) -> dict:
        """The Codex rollout line shape (spec §15) plus our `seq`."""
        return {
            "seq": self.seq,
            "timestamp": self.timestamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "type": self.kind,
            "payload": self.payload,
        }


class StagedRolloutLine(models.Model):
    """A rollout line of an import still in progress (issue 13, item 5). A big import writes its lines here in short
    batch transactions, then installs them into the append-only rollout with one INSERT ... SELECT and deletes them;
    a failed import deletes its staged lines, so it never leaves a rollout line behind. Not append-only."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveBigIntegerField()
    timestamp = models.DateTimeField()
    kind = models.CharField(max_length=32)
    payload = models.JSONField()
    tokens = models.PositiveBigIntegerField(default=0)
    item_tokens = models.JSONField(null=True, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="stagedrolloutline_unique_seq")]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind} (staged)"


class ContextWindow(models.Model):
    """A context window of a session (spec §9): opened at start, and by every line that changes the window id."""

    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="windows")
    number = models.PositiveIntegerField()
    window_id = models.CharField(max_length=64)
    previous_window_id = models.CharField(max_length=64, blank=True)
    first_window_id = models.CharField(max_length=64)
    opened_by_seq = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Seq of the rollout line that opened it (null for the first window)."
    )
    opened_at = models.DateTimeField()
    reason = models.CharField(max_length=32, help_text="session_start, or the kind of the line that opened it.")
    auto_compact_limit = models.PositiveBigIntegerField(
        null=True, blank=True,
        help_text="The auto-compact limit when the window opened (its provider's window and its policy then), so the "
                  "chart draws each window's own limit; null for windows opened before it was recorded.")

    class Meta:
        ordering = ["session", "opened_at", "pk"]

    def __str__(self) -> str:
        return f"window {self.number} of session {self.session_id}"

    def delete(self, *args, **kwargs):
        raise AppendOnlyError("context windows are never deleted")


class LiveItem(models.Model):
    """The cached model-visible history (position 0..n-1); always equals a rebuild from the rollout."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="live_items")
    position = models.PositiveIntegerField()
    item = models.JSONField()
    tokens = models.PositiveBigIntegerField()
    source_seq = models.PositiveBigIntegerField(help_text="Seq of the rollout line the item came from.")
    model_generated = models.BooleanField()

    class Meta:
        ordering = ["session", "position"]
        constraints = [models.UniqueConstraint(fields=["session", "position"], name="liveitem_unique_position")]

    def __str__(self) -> str:
        return f"{self.session_id}[{self.position}] {self.item.get('type')}"


class SimulatorRun(models.Model):
    """A simulated agent session driven by a scenario script (sessions_app.simulator)."""

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        PAUSED = "paused", "paused"
        STOPPED = "stopped", "stopped"
        FINISHED = "finished", "finished"
        FAILED = "failed", "failed"

    session = models.OneToOneField(Session, on_delete=models.PROTECT, related_name="simulator_run")
    scenario = models.CharField(max_length=100)
    seed = models.BigIntegerField(default=0)
    loop = models.BooleanField(default=False, help_text="Repeat the script (with variations) when it ends.")
    turns_per_minute = models.FloatField(
        null=True, blank=True, help_text="Pacing; empty runs turns as fast as possible."
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    state = models.JSONField(default=dict, blank=True, help_text="The saved ScenarioRun state (position, times).")
    next_step_at = models.DateTimeField(null=True, blank=True)
    steps_done = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_step_at"])]

    def __str__(self) -> str:
        return f"{self.scenario} on session #{self.session_id} ({self.status})"


class CodexSource(models.Model):
    """The Codex rollout file an imported or followed session came from (issue 13): its name, where a follower
    reads it, and how far it has been read. The file's lines are kept as they were (CodexSourceLine), so an
    export gives back exactly what came in."""

    session = models.OneToOneField(Session, on_delete=models.PROTECT, related_name="codex_source")
    name = models.CharField(max_length=255, help_text="The file's name, e.g. rollout-<time>-<thread id>.jsonl.")
    path = models.CharField(max_length=1024, blank=True, help_text="The followed file (empty for an upload).")
    followed = models.BooleanField(default=False, help_text="Kept in step with the file by follow_rollouts.")
    offset = models.PositiveBigIntegerField(default=0, help_text="Bytes of the file consumed (complete lines).")
    line_count = models.PositiveIntegerField(default=0, help_text="Lines kept from the file (CodexSourceLine).")
    head = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the file's first line: tells a rotated file from the same one."
    )
    context_window = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The usable window Codex reported (model_context_window), if any."
    )
    problems = models.JSONField(default=list, blank=True, help_text="Lines skipped or repaired, with reasons.")
    tail = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the bytes just before `offset`: the file still extends what was read."
    )
    inode = models.PositiveBigIntegerField(default=0, help_text="The followed file's inode when it was last read.")
    events = models.JSONField(
        default=list, blank=True, help_text="What happened to the followed file (a rewrite) and what was done about it."
    )
    continues = models.ForeignKey(
        Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="continued_by",
        help_text="The session this file was followed as before it was rewritten.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # The dashboard finds what a follower in another process wrote since its last look (live pages, issue 30).
        indexes = [models.Index(fields=["updated_at"], name="codexsource_updated_at")]

    def __str__(self) -> str:
        return f"{self.name} → session #{self.session_id}"


class CodexSourceLine(models.Model):
    """One line of a Codex rollout file exactly as read (without its newline), and the rollout line it became."""

    source = models.ForeignKey(CodexSource, on_delete=models.PROTECT, related_name="lines")
    number = models.PositiveIntegerField(help_text="1-based line number in the file.")
    text = models.TextField()
    terminated = models.BooleanField(default=True, help_text="False only for a last line without its newline.")
    rollout_seq = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Seq of the rollout line it became; empty when it is kept only here."
    )

    class Meta:
        ordering = ["source", "number"]
        constraints = [models.UniqueConstraint(fields=["source", "number"], name="codexsourceline_unique_number")]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.number}"


class Job(models.Model):
    """A piece of heavy work (a manual compaction from a page or the API, a replay, an import) handed to a runner:
    what the caller follows.

    With a broker a Celery worker runs it (`sessions_app.jobs.services.run_job`); without one the same job runs on
    the in-process pool, or in the request that asked to wait for it. A job runs at most once: a worker takes it with a conditional
    update from `queued` (a redelivered task finds it taken). The outcome is what the synchronous API would have
    answered: `http_status` and `result` (the body, or `{"error": {...}}`)."""

    class Kind(models.TextChoices):
        COMPACTION = "compaction"
        REPLAY = "replay"
        IMPORT = "import"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    session = models.ForeignKey(Session, on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    params = models.JSONField(default=dict, blank=True)
    payload = models.BinaryField(default=b"", blank=True, help_text="A rollout to import, byte for byte.")
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True,
        help_text="Renewed by the process running the job; a running job without one for a lease TTL has died.",
    )

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"])]
        constraints = [
            # One manual compaction of a session at a time, decided by the database whatever process answers the
            # request (sessions_app.compactions.queue): a second request meets this index and is refused with 409.
            models.UniqueConstraint(
                fields=["session"], condition=models.Q(kind="compaction", status__in=["queued", "running"]),
                name="one_active_compaction_job",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} job #{self.pk} ({self.status})"


class ArchiveRun(models.Model):
    """One run of the retention archiver (sessions_app.archive): what it was asked, what it did and what failed,
    so every removal can be traced to a run (issue 34, docs/retention-policy.md)."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    trigger = models.CharField(max_length=32, help_text="scheduler, command, or who ran it.")
    dry_run = models.BooleanField(default=False)
    cutoff = models.DateTimeField(help_text="Sessions with no activity since this time were due.")
    due = models.PositiveIntegerField(default=0, help_text="Sessions due in this run (at most the run's limit).")
    archived = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    detail = models.JSONField(default=dict, blank=True,
                              help_text="The sessions archived (or due, in a dry run) and each failure's reason.")

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"archive run #{self.pk} ({self.trigger}{', dry run' if self.dry_run else ''})"


class SessionArchive(models.Model):
    """The record of one archived session: its gzip-compressed JSON Lines file, equal to the session's export
    once decompressed, checked (written, synced, read back and hashed) before the session's rows were removed.
    Kept for good, so the file can be found and restored (sessions_app.archive.services.do_restore_archive).
    `session_id` is a plain number, not a foreign key: the session row is gone. On PostgreSQL the application's
    role may only SELECT and INSERT these rows (manage.py create_app_role), and the rollout's triggers let a
    session's lines be deleted only when its record is here (sessions_app.rollout_guard)."""

    session_id = models.PositiveBigIntegerField(unique=True, help_text="The archived (removed) session's id.")
    thread_id = models.UUIDField(db_index=True)
    title = models.CharField(max_length=200)
    source = models.CharField(max_length=16)
    provider_id = models.PositiveBigIntegerField(null=True, blank=True)
    policy_id = models.PositiveBigIntegerField(null=True, blank=True)
    session_created_at = models.DateTimeField()
    last_activity_at = models.DateTimeField(help_text="The session's last change before it was archived.")
    file_name = models.CharField(max_length=300, help_text="Path of the .jsonl.gz file under the archive folder.")
    export_name = models.CharField(max_length=255, help_text="The export's file name (a restore imports it as this).")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the decompressed file (the export's bytes).")
    file_lines = models.PositiveIntegerField(help_text="Lines in the decompressed file.")
    export_bytes = models.PositiveBigIntegerField(help_text="Size of the decompressed file.")
    compressed_bytes = models.PositiveBigIntegerField()
    rollout_lines = models.PositiveBigIntegerField(help_text="Rollout rows the session had (all of them removed).")
    last_seq = models.PositiveBigIntegerField()
    archived_at = models.DateTimeField()
    archived_by = models.CharField(max_length=150, help_text="scheduler, command, or the user who ran it.")
    run = models.ForeignKey(ArchiveRun, null=True, blank=True, on_delete=models.PROTECT, related_name="archives")

    class Meta:
        ordering = ["-archived_at", "-pk"]
        # GET /api/v1/archives: a keyset page newest first, one index range read however many archives.
        indexes = [models.Index(fields=["archived_at", "id"], name="session_archive_archived_at")]

    def __str__(self) -> str:
        return f"{self.title} (#{self.session_id}, archived)"
