"""Configuration (providers, prompts, hooks, policies) and the record of every compaction and attempt.

Field help texts name the Codex setting each field mirrors (spec §12) so the admin explains itself.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, validate_email
from django.db import models

from compaction_app.choices import text_choices
from compaction_app.engine import vocabulary as v
from compaction_app.engine.alert_delivery import DeliveryEvent, Severity
from compaction_app.engine.alerts import AlertKind, Thresholds
from compaction_app.engine.history import COMPACT_USER_MESSAGE_MAX_TOKENS, RETAINED_MESSAGE_TOKEN_BUDGET
from compaction_app.engine.hooks import DEFAULT_HOOK_TIMEOUT, MAX_HOOK_TIMEOUT, callable_allowed
from compaction_app.engine.settings import (
    DEFAULT_REQUEST_MAX_RETRIES,
    DEFAULT_STREAM_MAX_RETRIES,
    MAX_RETRIES_CAP,
    CompactionSettings,
)
from compaction_app.engine.thresholds import DEFAULT_CONTEXT_WINDOW, DEFAULT_EFFECTIVE_PERCENT
from compaction_app.engine.tokens import CODEX_ESTIMATOR
from compaction_app.providers import config as provider_config
from compaction_app.validators import (
    provider_key_problems,
    validate_header_envs,
    validate_outbound_url,
    validate_provider_base_url,
    validate_secret_env_name,
)
from compactweb.model_bases import NamedConfig, SingleRowSettings


class Provider(NamedConfig):
    class WireApi(models.TextChoices):
        RESPONSES = "responses", "Responses API"
        CHAT = "chat", "Chat Completions"
        ANTHROPIC = "anthropic", "Anthropic Messages"

    RemoteCompaction = text_choices(v.RemoteSupport)

    class Encoding(models.TextChoices):
        O200K = "o200k_base", "o200k_base"
        CL100K = "cl100k_base", "cl100k_base"

    EMBEDDED = provider_config.EMBEDDED

    name = models.CharField(max_length=100, unique=True, help_text="A unique name (Codex: model_providers.<id>).")
    base_url = models.CharField(
        max_length=500,
        help_text='Base URL of the API, e.g. https://api.openai.com/v1, or the literal "embedded" for the built-in '
        "simulated model (Codex: model_providers.<id>.base_url).",
        validators=[validate_provider_base_url],
    )
    wire_api = models.CharField(
        max_length=16, choices=WireApi.choices, default=WireApi.RESPONSES,
        help_text="Which wire protocol the provider speaks (Codex: model_providers.<id>.wire_api).",
    )
    model = models.CharField(max_length=200, help_text="Model name sent in requests (Codex: model).")
    fallback_model = models.CharField(
        max_length=200, blank=True,
        help_text="Model used when the main one fails with a model-specific error (blank = none).",
    )
    context_window = models.PositiveIntegerField(
        default=DEFAULT_CONTEXT_WINDOW, validators=[MinValueValidator(1)],
        help_text=f"The model's context window in tokens (Codex: model_context_window; unknown models "
        f"{DEFAULT_CONTEXT_WINDOW:,}, §2.2).",
    )
    effective_context_window_percent = models.PositiveSmallIntegerField(
        default=DEFAULT_EFFECTIVE_PERCENT, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Usable window = context window × this percent / 100 (Codex model metadata, default "
        f"{DEFAULT_EFFECTIVE_PERCENT}, §2.2).",
    )
    remote_compaction = models.CharField(
        max_length=8, choices=RemoteCompaction.choices, default=RemoteCompaction.NONE,
        help_text="Which server-side compaction endpoint the provider supports (§2.5).",
    )
    api_key_env = models.CharField(
        max_length=200, blank=True,
        help_text="The NAME of the environment variable holding the API key; the key itself is never stored. "
        "Only names the deployment allows: starting with COMPACTWEB_SECRET_ENV_PREFIX (default COMPACTWEB_KEY_) "
        "or listed in COMPACTWEB_SECRET_ENV_NAMES.",
        validators=[validate_secret_env_name],
    )
    header_envs = models.JSONField(
        default=dict, blank=True, validators=[validate_header_envs],
        help_text="Extra request headers whose VALUES come from environment variables, as {header: variable "
        "name}, e.g. {\"chatgpt-account-id\": \"COMPACTWEB_KEY_ACCOUNT\"}. Values are read when a request is "
        "built and never stored; the names follow the api_key_env rule. An unset variable sends no header.",
    )
    encoding = models.CharField(
        max_length=32, choices=Encoding.choices, default=Encoding.O200K,
        help_text="tiktoken encoding used to count tokens exactly for this provider's models.",
    )
    connect_timeout = models.FloatField(
        default=provider_config.ProviderConfig.connect_timeout, validators=[MinValueValidator(0.1)],
        help_text="Seconds to wait for a connection.",
    )
    read_timeout = models.FloatField(
        default=provider_config.ProviderConfig.read_timeout, validators=[MinValueValidator(0.1)],
        help_text="Seconds to wait for data on an open stream (Codex: stream_idle_timeout_ms).",
    )
    stream_max_retries = models.PositiveSmallIntegerField(
        default=DEFAULT_STREAM_MAX_RETRIES, validators=[MaxValueValidator(MAX_RETRIES_CAP)],
        help_text="Stream reconnection attempts (Codex: model_providers.<id>.stream_max_retries, default "
        f"{DEFAULT_STREAM_MAX_RETRIES}, cap {MAX_RETRIES_CAP}).",
    )
    request_max_retries = models.PositiveSmallIntegerField(
        default=DEFAULT_REQUEST_MAX_RETRIES, validators=[MaxValueValidator(MAX_RETRIES_CAP)],
        help_text="HTTP request retries (Codex: model_providers.<id>.request_max_retries, default "
        f"{DEFAULT_REQUEST_MAX_RETRIES}, cap {MAX_RETRIES_CAP}).",
    )
    supports_reasoning = models.BooleanField(
        default=False, help_text="Whether requests carry reasoning settings and ask for encrypted reasoning."
    )
    supports_images = models.BooleanField(
        default=True,
        help_text="Whether the model takes image input (Codex: the model's input_modalities). Off: images in "
        "messages and tool outputs are sent as a placeholder text and generated images are dropped, in every "
        "request to this provider (spec §6).",
    )
    comp_hash = models.CharField(
        max_length=200, blank=True,
        help_text="The model's compatibility hash; a change between turns triggers comp_hash_changed (§2.4).",
    )
    price_per_million_tokens = models.DecimalField(
        max_digits=10, decimal_places=4, null=True, blank=True,
        help_text="Price per 1M tokens, to show a compaction's net saving in money (blank: tokens only).")
    derived_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="derived",
        help_text="Made by compactweb from this provider with another model or window (a scenario's model switch, "
        "an imported file's window); not offered in the pages' provider lists.")

    @property
    def is_embedded(self) -> bool:
        return self.base_url == self.EMBEDDED

    def clean(self) -> None:
        # Issue 27: a key goes only to the base URLs the deployment bound it to (the API serializer asks the same).
        problems = provider_key_problems(base_url=self.base_url, api_key_env=self.api_key_env,
                                         header_envs=self.header_envs)
        if problems:
            raise ValidationError(problems)

    @property
    def usable_context_window(self) -> int:
        """Spec §2.2: context window × effective percent / 100 (integer division)."""
        return self.context_window * self.effective_context_window_percent // 100


class Prompt(NamedConfig):
    name = models.CharField(max_length=100, unique=True, help_text="A unique name for this prompt.")
    text = models.TextField(
        help_text="Summarisation prompt for local compaction (Codex: experimental_compact_prompt_file contents)."
    )


class Hook(NamedConfig):
    Event = text_choices(v.HookEvent)

    Kind = text_choices(v.HookKind)

    Matcher = text_choices(v.HookMatcher)

    name = models.CharField(max_length=100, unique=True, help_text="A unique name for this hook.")
    event = models.CharField(max_length=16, choices=Event.choices, help_text="When it runs (spec §7).")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CALLABLE, help_text="How it runs.")
    target = models.CharField(
        max_length=500, help_text="Dotted path of a Python callable, or the URL a webhook is POSTed to."
    )
    matcher = models.CharField(
        max_length=8, choices=Matcher.choices, default=Matcher.ANY,
        help_text="Which compaction triggers the hook matches (Codex hook matcher: manual / auto).",
    )
    timeout_seconds = models.FloatField(
        default=DEFAULT_HOOK_TIMEOUT, validators=[MinValueValidator(0.1), MaxValueValidator(MAX_HOOK_TIMEOUT)],
        help_text=f"The hook is failed after this many seconds (at most {MAX_HOOK_TIMEOUT:g}).",
    )
    enabled = models.BooleanField(default=True, help_text="Disabled hooks never run.")

    def __str__(self) -> str:
        return f"{self.name} ({self.event})"

    def clean(self) -> None:
        # Issue 14: checked when written, so a bad target is a form error instead of a failed hook at run time.
        if self.kind == self.Kind.WEBHOOK:
            try:
                validate_outbound_url(self.target)
            except ValidationError as exc:
                raise ValidationError({"target": exc.messages}) from None
        elif self.kind == self.Kind.CALLABLE:
            prefixes = tuple(settings.COMPACTWEB_HOOK_CALLABLE_PREFIXES)
            if not callable_allowed(self.target, prefixes):
                raise ValidationError({"target": f"callable hooks must live under {', '.join(prefixes) or '(none)'}"
                                       " (COMPACTWEB_HOOK_CALLABLE_PREFIXES)"})


class CompactionPolicy(NamedConfig):
    Scope = text_choices(v.Scope)

    class TokenCounterChoice(models.TextChoices):
        PROVIDER_ENCODING = "provider_encoding", "exact: the provider's tiktoken encoding"
        CODEX_ESTIMATE = CODEX_ESTIMATOR, "Codex's estimator: ceil(bytes / 4)"

    Strategy = text_choices(v.StrategyPreference)

    PinMode = text_choices(v.PinMode)

    name = models.CharField(max_length=100, unique=True, help_text="A unique name for this policy.")
    auto_compact_token_limit = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(0)],
        help_text="Auto-compact limit in tokens (Codex: model_auto_compact_token_limit). Blank = 90% of the window; "
        "in the total scope a larger value is clamped to 90% of the window (§2.2). Stored as given.",
    )
    auto_compact_scope = models.CharField(
        max_length=24, choices=Scope.choices, default=Scope.TOTAL,
        help_text="What the limit is compared with (Codex: model_auto_compact_token_limit_scope, §2.3).",
    )
    token_counter = models.CharField(
        max_length=24, choices=TokenCounterChoice.choices, default=TokenCounterChoice.PROVIDER_ENCODING,
        help_text="How items are counted: the provider's exact tiktoken encoding, or Codex's byte estimator (§3.1).",
    )
    strategy = models.CharField(
        max_length=16, choices=Strategy.choices, default=Strategy.AUTO,
        help_text="Compaction implementation; auto follows Codex's selection (§2.5).",
    )
    remote_compaction_v2 = models.BooleanField(
        default=True, help_text="With strategy auto, prefer remote v2 over v1 (Codex: features.remote_compaction_v2)."
    )
    token_budget = models.BooleanField(
        default=False, help_text="With strategy auto, use token-budget new windows (Codex: features.token_budget)."
    )
    compact_prompt = models.TextField(
        blank=True,
        help_text="Summarisation prompt for local compaction (Codex: compact_prompt). Blank = the default "
        "SUMMARIZATION_PROMPT. Do not set together with a stored prompt.",
    )
    prompt = models.ForeignKey(
        Prompt, null=True, blank=True, on_delete=models.PROTECT, related_name="policies",
        help_text="A stored prompt instead of compact_prompt (Codex: experimental_compact_prompt_file).",
    )
    user_message_budget = models.PositiveIntegerField(
        default=COMPACT_USER_MESSAGE_MAX_TOKENS, validators=[MinValueValidator(0)],
        help_text="Tokens of user messages kept by local compaction (Codex: COMPACT_USER_MESSAGE_MAX_TOKENS, §5.1).",
    )
    retained_message_budget = models.PositiveIntegerField(
        default=RETAINED_MESSAGE_TOKEN_BUDGET, validators=[MinValueValidator(0)],
        help_text="Tokens of messages retained by remote v2 (Codex: RETAINED_MESSAGE_TOKEN_BUDGET, §5.4).",
    )
    stream_max_retries = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(MAX_RETRIES_CAP)],
        help_text="Overrides the provider's stream_max_retries (blank = the provider's; §6.2).",
    )
    request_max_retries = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(MAX_RETRIES_CAP)],
        help_text="Overrides the provider's request_max_retries (blank = the provider's).",
    )
    fallback_model = models.CharField(
        max_length=200, blank=True, help_text="Overrides the provider's fallback model (blank = the provider's)."
    )
    masking_keep_turns = models.PositiveSmallIntegerField(
        default=CompactionSettings.masking_keep_turns,
        help_text="Observation masking: tool outputs of the last N user turns are kept (compactweb).",
    )
    masking_keep_tokens = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="Observation masking: keep the newest outputs that fit in this many tokens instead (blank = turns).",
    )
    masking_summarise = models.BooleanField(
        default=False,
        help_text="Observation masking hybrid: summarise the masked history when masking alone leaves it above half "
        "the limit.",
    )
    retention_probes = models.BooleanField(
        default=False,
        help_text="After each compaction also ask the model probe questions and judge its answers (costs tokens; "
        "the structural retention check always runs).",
    )
    retention_flag_below = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Flag a compaction whose retention score is below this (0..1; blank = never).",
    )
    retention_retry_prompt = models.ForeignKey(
        Prompt, null=True, blank=True, on_delete=models.PROTECT, related_name="retry_policies",
        help_text="With a flag threshold: a local summary scoring below it is made once more with this prompt; "
        "the better-scoring window is installed.",
    )
    pin_mode = models.CharField(
        max_length=16, choices=PinMode.choices, default=PinMode.REINJECT,
        help_text="What happens to the session's pinned context at each compaction.",
    )
    pin_budget_tokens = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The pins' total token budget; pinning past it is refused (blank = 5% of the usable window).",
    )
    hooks = models.ManyToManyField(
        Hook, blank=True, related_name="policies", help_text="PreCompact / PostCompact hooks run by this policy (§7)."
    )

    class Meta(NamedConfig.Meta):
        verbose_name_plural = "compaction policies"

    def clean(self) -> None:
        # spec §12: both prompt sources set is a configuration error (precedence unknown upstream).
        if self.compact_prompt.strip() and self.prompt_id:
            raise ValidationError(
                {"prompt": "Set either compact_prompt or prompt, not both (spec §12: setting both is an error)."}
            )

    def counter_name(self, provider: Provider) -> str:
        """The compaction_app.engine.tokens counter name this policy uses with `provider`."""
        if self.token_counter == self.TokenCounterChoice.CODEX_ESTIMATE:
            return CODEX_ESTIMATOR
        return provider.encoding


Trigger = text_choices(v.Trigger)


Reason = text_choices(v.Reason)


Phase = text_choices(v.Phase)


Implementation = text_choices(v.Implementation)


class Compaction(models.Model):
    """One installed compaction (a CompactedItem, spec §1.5). The rollout's `compacted` line is the truth."""

    session = models.ForeignKey("sessions_app.Session", on_delete=models.PROTECT, related_name="compactions")
    rollout_seq = models.PositiveBigIntegerField(help_text="Seq of the `compacted` rollout line that installed it.")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    reason = models.CharField(max_length=32, choices=Reason.choices)
    phase = models.CharField(max_length=24, choices=Phase.choices)
    implementation = models.CharField(max_length=32, choices=Implementation.choices)
    strategy = models.CharField(max_length=16, choices=CompactionPolicy.Strategy.choices)
    summary = models.TextField(blank=True, help_text="The summary text (local); empty for remote and token budget.")
    # Null, not "": "no prompt was sent" is a fact of its own, apart from an unnamed one (issue 33).
    prompt_name = models.CharField(  # noqa: DJ001
        max_length=200, null=True, blank=True,
        help_text="The summarisation prompt the window was made with (the default, the policy's compact_prompt, a "
        "stored prompt, the retention retry prompt); null when the method sent no prompt.")
    prompt_version = models.CharField(  # noqa: DJ001
        max_length=16, null=True, blank=True,
        help_text="That prompt's version: the first 12 hex digits of its text's SHA-256 (changes with the text).")
    extra_instructions = models.TextField(
        blank=True, default="",
        help_text="The operator's extra instructions appended to the summarisation prompt (a manual local "
        "compaction); empty when none were given. Also in the rollout: the `compacted` line's `extra_instructions`.")
    tokens_before = models.PositiveBigIntegerField(default=0)
    tokens_after = models.PositiveBigIntegerField(default=0)
    window_number = models.PositiveIntegerField(help_text="The window this compaction opened (§9).")
    window_id = models.CharField(max_length=64)
    previous_window_id = models.CharField(max_length=64, blank=True)
    first_window_id = models.CharField(max_length=64)
    item_id = models.CharField(max_length=64, help_text="The ContextCompaction turn item id (§1.4).")
    injection = models.CharField(
        max_length=32, blank=True, default="",
        help_text="Where the initial context went (§5.3): do_not_inject or before_last_user_message.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # What the compaction was made under, kept on the row so the analytics roll-up and its exact recomputation
    # group by the same fact even after the session switches policy or model (issue 34).
    policy = models.ForeignKey(
        CompactionPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The session's policy when the compaction was written.")
    model = models.CharField(max_length=200, blank=True,
                             help_text="The session's model (its latest turn's) when the compaction was written.")
    rolled_back = models.BooleanField(default=False, help_text="Cached; the rollout's rollback lines are the truth.")
    # What the compaction forgot and what it cost (issue 18, docs/retention.md).
    retention = models.JSONField(
        null=True, blank=True, help_text="Structural retention check: score, per-category counts, every fact.")
    probe_retention = models.JSONField(
        null=True, blank=True, help_text="Model-judged retention check, when the policy enables it.")
    retention_score = models.FloatField(null=True, blank=True, help_text="kept / total facts (structural), 0..1.")
    call_tokens = models.PositiveBigIntegerField(default=0, help_text="Tokens the compaction's model calls spent.")
    probe_tokens = models.PositiveBigIntegerField(default=0, help_text="Tokens the retention probes spent.")
    reread_tokens = models.PositiveBigIntegerField(
        default=0, help_text="Re-read tax: tokens of dropped items fetched again in the next turns.")
    flagged = models.CharField(max_length=200, blank=True, help_text="Why the compaction was flagged, if it was.")
    inferred = models.JSONField(
        default=dict, blank=True,
        help_text="For an imported compaction: each label inferred from the rollout, and the evidence.",
    )
    history = models.BooleanField(
        default=False,
        help_text="Read after the fact (an import, or what a follower found already written in a file): it "
        "happened before it was seen, so it never counts toward a live storm.")

    class Meta:
        ordering = ["session", "rollout_seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "rollout_seq"], name="compaction_unique_rollout_seq")
        ]
        # The compaction-storm alert counts the fleet's compactions of the last minutes after every compaction.
        indexes = [models.Index(fields=["created_at"], name="compaction_created_at")]

    def __str__(self) -> str:
        return f"compaction #{self.pk} of session {self.session_id} (window {self.window_number})"

    @property
    def tokens_freed(self) -> int:
        """The one definition of what a compaction freed: its window tokens before minus after (the session meter
        right before it and right after it installed); negative when it did not reduce. TOKENS_FREED in SQL."""
        return self.tokens_before - self.tokens_after


# Compaction.tokens_freed as a query expression, for sums over compactions (analytics, the retention roll-up).
TOKENS_FREED = models.F("tokens_before") - models.F("tokens_after")


class CompactionAttempt(models.Model):
    """One compaction attempt including failures (Codex's CodexCompactionEvent, spec §10)."""

    Status = text_choices(v.AttemptStatus)

    session = models.ForeignKey("sessions_app.Session", on_delete=models.PROTECT, related_name="compaction_attempts")
    compaction = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.PROTECT, related_name="attempts"
    )
    item_id = models.CharField(max_length=64, blank=True)
    turn_id = models.CharField(max_length=64, blank=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    reason = models.CharField(max_length=32, choices=Reason.choices)
    implementation = models.CharField(max_length=32, choices=Implementation.choices)
    phase = models.CharField(max_length=24, choices=Phase.choices)
    strategy = models.CharField(max_length=16, choices=CompactionPolicy.Strategy.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    error_kind = models.CharField(max_length=64, blank=True, help_text="codex_error_kind, when failed.")
    error_http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    tokens_before = models.PositiveBigIntegerField(default=0, help_text="active_context_tokens_before")
    tokens_after = models.PositiveBigIntegerField(null=True, blank=True, help_text="active_context_tokens_after")
    compaction_summary_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cached_input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    retained_image_count = models.PositiveIntegerField(null=True, blank=True)
    retries = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(null=True, blank=True)
    # The session's policy and provider when the attempt started (a model switch changes the provider): what the
    # analytics filters select, on the row and in the roll-up alike (issue 34).
    policy = models.ForeignKey(CompactionPolicy, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    provider = models.ForeignKey(Provider, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-started_at", "-pk"]
        # A session's newest attempt (every fleet row, a session's attempt list) and the analytics over a period
        # read an index range, not every attempt of a year (issue 34). The latency percentiles pick their value
        # inside one histogram bucket of the roll-up by an index range of the timed attempts.
        indexes = [
            models.Index(fields=["session", "-started_at", "-id"], name="attempt_session_newest"),
            models.Index(fields=["started_at"], name="attempt_started_at"),
            models.Index(fields=["duration_ms"], name="attempt_timed_duration",
                         condition=models.Q(duration_ms__isnull=False) & ~models.Q(status="running")),
        ]

    def __str__(self) -> str:
        return f"attempt #{self.pk} ({self.implementation}, {self.status})"


class HookRun(models.Model):
    Status = text_choices(v.HookStatus)

    attempt = models.ForeignKey(CompactionAttempt, on_delete=models.PROTECT, related_name="hook_runs")
    hook = models.ForeignKey(Hook, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    hook_name = models.CharField(max_length=100, help_text="Kept even if the hook is later deleted.")
    event = models.CharField(max_length=16, choices=Hook.Event.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
    stop_reason = models.TextField(blank=True)
    duration_ms = models.PositiveBigIntegerField(default=0)
    output = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.hook_name} {self.event} {self.status}"




# --- the analytics roll-up (issue 34) ------------------------------------------------------------------------------
# Aggregates kept as the records are written: compaction_app.records applies each write's change to these rows in
# the same transaction (compaction_app.rollup), so the analytics page reads O(days x groups) rows over all time,
# not every attempt and compaction. Plain ids, 0 for none: a unique key with NULLs would never conflict.


class AttemptRollup(models.Model):
    """Attempts of one UTC day (of started_at) and one combination of the analytics dimensions, policy and
    provider: how many, how many installed a compaction and the window tokens those freed, how many were timed."""

    day = models.DateField()
    policy_id = models.PositiveBigIntegerField(default=0)
    provider_id = models.PositiveBigIntegerField(default=0)
    trigger = models.CharField(max_length=16)
    reason = models.CharField(max_length=32)
    implementation = models.CharField(max_length=32)
    phase = models.CharField(max_length=24)
    strategy = models.CharField(max_length=16)
    status = models.CharField(max_length=16)
    attempts = models.BigIntegerField(default=0)
    installed = models.BigIntegerField(default=0)
    freed = models.BigIntegerField(default=0)
    timed = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["day", "policy_id", "provider_id", "trigger", "reason", "implementation", "phase", "strategy",
                    "status"], name="attempt_rollup_key")]

    def __str__(self) -> str:
        return f"{self.day} {self.status}: {self.attempts}"


class LatencyRollup(models.Model):
    """How many timed attempts (finished, with a duration) of a policy and provider fall in one duration bucket
    (compaction_app.rollup.latency_bucket): the histogram the percentiles walk."""

    policy_id = models.PositiveBigIntegerField(default=0)
    provider_id = models.PositiveBigIntegerField(default=0)
    bucket = models.PositiveBigIntegerField(help_text="The bucket's lowest duration in ms.")
    attempts = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["policy_id", "provider_id", "bucket"],
                                               name="latency_rollup_key")]

    def __str__(self) -> str:
        return f"{self.bucket} ms: {self.attempts}"


class CompactionRollup(models.Model):
    """Compactions not rolled back of one UTC day (of created_at), method, policy and model: the retention and
    cost tables' sums (the mean retention is retention_sum / scored)."""

    day = models.DateField()
    strategy = models.CharField(max_length=16)
    policy_id = models.PositiveBigIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    compactions = models.BigIntegerField(default=0)
    scored = models.BigIntegerField(default=0)
    retention_sum = models.FloatField(default=0.0)
    freed = models.BigIntegerField(default=0)
    spent = models.BigIntegerField(default=0)
    probes = models.BigIntegerField(default=0)
    reread = models.BigIntegerField(default=0)
    flagged = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["day", "strategy", "policy_id", "model"],
                                               name="compaction_rollup_key")]

    def __str__(self) -> str:
        return f"{self.day} {self.strategy}: {self.compactions}"


class ArchivedShare(models.Model):
    """What one session retention archived contributed to the all-time analytics (issue 34's roll-up), kept when
    its records were removed so "all time" still counts it (docs/retention-policy.md, "Analytics"). `attempts`
    holds its AttemptRollup and LatencyRollup amounts, `compactions` each of its compactions' COMPACTION_FIELDS
    (compaction_app.rollup), and ArchivedDuration its timed attempts' durations (the exact percentiles).
    `rollup.rebuild` counts these with the live records. A restore moves the compactions back to the re-imported
    rows (`restored_at`); the attempts stay here, since the archive file does not carry them."""

    archive = models.OneToOneField(
        "sessions_app.SessionArchive", on_delete=models.PROTECT, related_name="analytics_share"
    )
    session_id = models.PositiveBigIntegerField(help_text="The archived (removed) session's id.")
    attempts = models.JSONField(default=list, help_text="[table, key, {field: amount}] of its attempts.")
    compactions = models.JSONField(default=list, help_text="Each compaction's rollout seq and figures.")
    restored_at = models.DateTimeField(null=True, blank=True, help_text="When its compactions moved back.")

    def __str__(self) -> str:
        return f"analytics share of archived session #{self.session_id}"


class ArchivedRollup(models.Model):
    """How many sessions retention archived on one UTC day (of archived_at): the all-time analytics' "includes N
    archived sessions" in O(days) rows, kept in the archiving transaction (compaction_app.rollup)."""

    day = models.DateField(unique=True)
    sessions = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.day}: {self.sessions} archived"


class ArchivedDuration(models.Model):
    """How many timed attempts of an archived session had this duration (under this policy and provider): the
    latency percentiles over all time pick their exact value among these and the live attempts."""

    share = models.ForeignKey(ArchivedShare, on_delete=models.CASCADE, related_name="durations")
    policy_id = models.PositiveBigIntegerField(default=0)
    provider_id = models.PositiveBigIntegerField(default=0)
    duration_ms = models.PositiveBigIntegerField()
    attempts = models.BigIntegerField(default=1)

    class Meta:
        indexes = [models.Index(fields=["duration_ms"], name="archived_duration_ms")]

    def __str__(self) -> str:
        return f"{self.duration_ms} ms: {self.attempts}"


class AuditEntry(models.Model):
    """Who did what, when and why: compactions, rollbacks, redos, imports and configuration changes."""

    class Action(models.TextChoices):
        COMPACTION = "compaction", "compaction"
        COMPACTION_FAILED = "compaction_failed", "compaction failed"
        ROLLBACK = "rollback", "rollback"
        REDO = "redo", "redo"
        THREAD_ROLLBACK = "thread_rollback", "thread rollback"
        IMPORT = "import", "import"
        REPLAY = "replay", "replay"
        POLICY_CHANGE = "policy_change", "policy change"
        PROVIDER_CHANGE = "provider_change", "provider change"
        FAULT_INJECTION = "fault_injection", "fault injection"
        ARCHIVE = "archive", "session archived and removed (retention)"
        RETENTION_CHANGE = "retention_change", "retention settings change"
        GATEWAY_PAUSE = "gateway_pause", "gateway session paused"
        GATEWAY_RESUME = "gateway_resume", "gateway session resumed"
        GATEWAY_COMPACT_REQUEST = "gateway_compact_request", "gateway compaction requested"
        GATEWAY_COMPACTION = "gateway_compaction", "gateway compaction at the next request"
        GATEWAY_ROLLBACK = "gateway_rollback", "gateway compaction rolled back for the upstream"
        ALERT_SILENCE = "alert_silence", "alerts snoozed or silenced"
        ALERT_SILENCE_LIFT = "alert_silence_lift", "alert snooze or silence lifted"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=32, choices=Action.choices)
    session = models.ForeignKey(
        "sessions_app.Session", null=True, blank=True, on_delete=models.PROTECT, related_name="audit_entries"
    )
    compaction = models.ForeignKey(
        Compaction, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_entries"
    )
    reason = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.action} by {self.actor or 'system'} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class AlertSettings(SingleRowSettings):
    """The fleet's alert thresholds (one row, edited in the admin; issue 18, docs/alerts.md). The defaults are the
    engine's (compaction_app.engine.alerts.Thresholds), which this row is turned into."""

    storm_count = models.PositiveSmallIntegerField(
        default=Thresholds.storm_count, validators=[MinValueValidator(1)],
        help_text="A session storm is MORE than this many compactions…")
    storm_minutes = models.PositiveSmallIntegerField(
        default=Thresholds.storm_minutes, validators=[MinValueValidator(1)],
        help_text="…within this many minutes.")
    fleet_storm_count = models.PositiveIntegerField(
        default=Thresholds.fleet_storm_count, validators=[MinValueValidator(1)],
        help_text="A fleet storm: more than this many compactions…")
    fleet_storm_minutes = models.PositiveSmallIntegerField(
        default=Thresholds.fleet_storm_minutes, validators=[MinValueValidator(1)],
        help_text="…across all sessions within this many minutes.")
    fleet_storm_per_session = models.FloatField(
        default=Thresholds.fleet_storm_per_session, validators=[MinValueValidator(0.0)],
        help_text="…or more than this many per active session (one written to in the window), whichever is higher: "
        "the fleet threshold grows with the fleet.")
    loop_turns = models.PositiveSmallIntegerField(
        default=Thresholds.loop_turns, validators=[MinValueValidator(1)],
        help_text="A loop: usage back above the limit within this many turns of a compaction.")
    reread_turns = models.PositiveSmallIntegerField(
        default=Thresholds.reread_turns, validators=[MinValueValidator(1)],
        help_text="Watch this many turns after a compaction for re-reads of what it dropped (and count their tax).")
    reread_min_calls = models.PositiveSmallIntegerField(
        default=Thresholds.reread_min_calls, validators=[MinValueValidator(1)],
        help_text="Alert after this many re-fetches…")
    reread_min_share = models.FloatField(
        default=Thresholds.reread_min_share, validators=[MinValueValidator(0.0)],
        help_text="…that cost at least this share of the tokens the compaction freed (0: any re-fetch counts).")
    failure_streak = models.PositiveSmallIntegerField(
        default=Thresholds.failure_streak, validators=[MinValueValidator(1)],
        help_text="Alert after this many failed attempts in a row.")
    pause_on = models.JSONField(
        default=list, blank=True,
        help_text=f'Alert kinds that pause the simulated session, e.g. ["loop", "storm"] ({", ".join(AlertKind)}).')

    class Meta:
        verbose_name = verbose_name_plural = "alert settings"

    def __str__(self) -> str:
        return "alert settings"

    def clean(self) -> None:
        known = {k.value for k in AlertKind}
        if not isinstance(self.pause_on, list) or not set(self.pause_on) <= known:
            raise ValidationError({"pause_on": f"a list of alert kinds: {', '.join(sorted(known))}"})


# The words people read for each of the engine's alert kinds (the admin, the alerts page, the fleet board).
ALERT_KIND_LABELS = {
    AlertKind.STORM: "compaction storm (session)",
    AlertKind.FLEET_STORM: "compaction storm (fleet)",
    AlertKind.LOOP: "loop: back above the limit",
    AlertKind.REREAD: "compact-forget-re-read",
    AlertKind.FAILURE_STREAK: "failure streak",
}


class Alert(models.Model):
    """One raised alert, linked to the compactions (or attempts) that caused it."""

    Kind = models.TextChoices("Kind", [(kind.name, (kind.value, ALERT_KIND_LABELS[kind])) for kind in AlertKind])

    kind = models.CharField(max_length=16, choices=Kind.choices)
    session = models.ForeignKey("sessions_app.Session", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="alerts")
    message = models.TextField()
    detail = models.JSONField(default=dict, blank=True)
    compactions = models.ManyToManyField(Compaction, blank=True, related_name="alerts")
    attempts = models.ManyToManyField(CompactionAttempt, blank=True, related_name="alerts")
    paused = models.BooleanField(default=False, help_text="Whether the alert paused the session.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Repeats of one cause (same rule, same session) while the alert is open are counted on it, not raised again.
    count = models.PositiveIntegerField(default=1, help_text="How many times this cause was raised while open.")
    last_at = models.DateTimeField(null=True, blank=True, help_text="When this cause was last raised.")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.kind} alert #{self.pk}"


class AlertSilence(models.Model):
    """An operator's snooze (until a time) or silence (no end) of one rule, one session, or one rule in one
    session: matching alerts are not raised while it holds. Who and when are recorded."""

    kind = models.CharField(max_length=16, choices=Alert.Kind.choices, blank=True,
                            help_text="The rule silenced (blank: every rule of the session).")
    session = models.ForeignKey("sessions_app.Session", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="alert_silences", help_text="The session (blank: the whole fleet).")
    until = models.DateTimeField(null=True, blank=True, help_text="End of a snooze (blank: silenced until lifted).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.CheckConstraint(condition=~models.Q(kind="", session__isnull=True),
                                              name="alert_silence_has_a_scope")]

    def __str__(self) -> str:
        return f"silence of {self.kind or 'every rule'} for {self.session_id or 'the fleet'}"


class SessionWatch(models.Model):
    """A session's incremental alert state (engine.alerts.Watch as JSON): read and written once per turn."""

    session = models.OneToOneField("sessions_app.Session", on_delete=models.CASCADE, related_name="watch")
    state = models.JSONField(default=dict)

    def __str__(self) -> str:
        return f"watch of session {self.session_id}"


class RetentionSettings(SingleRowSettings):
    """The data-retention policy (one row, edited in the admin by the admin role; issue 34,
    docs/retention-policy.md): sessions that ended more than `archive_after_days` ago are written to a compressed
    JSON Lines file equal to their export and then removed from the database. Where the files go is the
    deployment's choice (COMPACTWEB_ARCHIVE_DIR), not a web admin's: a page must not choose where the server
    writes."""

    enabled = models.BooleanField(
        default=False, help_text="Archive and remove ended sessions on the scheduler's schedule.")
    archive_after_days = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1)],
        help_text="A session is archived once it has had no activity (no rollout line, no change) for this many days.")
    max_sessions_per_run = models.PositiveIntegerField(
        default=500, validators=[MinValueValidator(1)],
        help_text="At most this many sessions per run (the rest wait for the next run), so a run stays short.")
    run_every_hours = models.PositiveSmallIntegerField(
        default=24, validators=[MinValueValidator(1)], help_text="How often the scheduler runs the archiver.")
    last_run_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When the scheduler last started a run (its claim).")

    class Meta:
        verbose_name = verbose_name_plural = "retention settings"

    def __str__(self) -> str:
        return "retention settings"


class AlertDestination(models.Model):
    """Where alerts are delivered (issue 45, docs/alerts.md "Delivery"): a Slack-compatible incoming webhook, a JSON
    webhook signed with HMAC, or email through Django's email backend; for the alert kinds and severities chosen.
    URLs pass the deployment's outbound rule on save and again before each send; the signing secret is named, never
    stored (an environment variable, like a provider's key), and so may the webhook URL be (a Slack incoming webhook's
    URL is itself the credential that lets anyone post)."""

    class Kind(models.TextChoices):
        SLACK = "slack", "Slack-compatible incoming webhook"
        WEBHOOK = "webhook", "JSON webhook (HMAC-signed)"
        EMAIL = "email", "Email"

    Severity = models.TextChoices("Severity", [(s.name, (s.value, s.value)) for s in Severity])

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    url = models.CharField(
        max_length=500, blank=True, validators=[validate_outbound_url],
        help_text="The webhook URL (Slack-compatible and JSON webhooks). Must pass the deployment's outbound rule: "
                  "private and loopback hosts only when COMPACTWEB_OUTBOUND_ALLOW lists them.")
    url_env = models.CharField(
        max_length=100, blank=True, validators=[validate_secret_env_name],
        help_text="Instead of the URL: the environment variable holding it (a webhook URL that is itself a secret, "
                  "as Slack's is); read before each send, never stored or shown.")
    secret_env = models.CharField(
        max_length=100, blank=True, validators=[validate_secret_env_name],
        help_text="JSON webhook: the environment variable holding the HMAC signing secret (never stored here).")
    recipients = models.TextField(
        blank=True, help_text="Email: the addresses to send to, separated by commas or new lines.")
    kinds = models.JSONField(
        default=list, blank=True,
        help_text=f'The alert kinds sent here, e.g. ["storm", "loop"] (empty: every kind; {", ".join(AlertKind)}).')
    min_severity = models.CharField(
        max_length=16, choices=Severity.choices, default=Severity.INFO,
        help_text="Only alerts at least this severe (docs/alerts.md lists each kind's severity).")
    timeout_seconds = models.FloatField(
        default=5.0, validators=[MinValueValidator(0.1), MaxValueValidator(30.0)],
        help_text="One send gives up after this long (then it is retried with back-off).")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def recipient_list(self) -> list[str]:
        return [r.strip() for r in self.recipients.replace("\n", ",").split(",") if r.strip()]

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if self.kind in (self.Kind.SLACK, self.Kind.WEBHOOK):
            if not self.url and not self.url_env:
                errors["url"] = "a webhook destination needs its URL, or the variable that holds it"
            elif self.url and self.url_env:
                errors["url_env"] = "give the URL or the variable that holds it, not both"
        if self.kind == self.Kind.WEBHOOK and not self.secret_env:
            errors["secret_env"] = "a JSON webhook is signed: name the variable that holds its secret"
        if self.kind == self.Kind.EMAIL:
            if not self.recipient_list():
                errors["recipients"] = "an email destination needs at least one address"
            for address in self.recipient_list():
                try:
                    validate_email(address)
                except ValidationError:
                    errors["recipients"] = f"{address!r} is not an email address"
        known = {k.value for k in AlertKind}
        if not isinstance(self.kinds, list) or any(k not in known for k in self.kinds):
            errors["kinds"] = f"a list of alert kinds among {', '.join(sorted(known))}"
        if errors:
            raise ValidationError(errors)

    def wants(self, *, kind: str, severity: Severity) -> bool:
        """Whether an alert of this kind and severity is sent here."""
        return (not self.kinds or kind in self.kinds) and severity.rank >= Severity(self.min_severity).rank


class AlertDelivery(models.Model):
    """One message to one destination about one alert (or an admin's test), with its attempts: pending until sent,
    retried with back-off, and a dead letter an admin sees once the attempts are spent (docs/alerts.md)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        DEAD = "dead", "dead letter"

    Event = models.TextChoices("Event", [(e.name, e.value) for e in DeliveryEvent])

    destination = models.ForeignKey(AlertDestination, on_delete=models.CASCADE, related_name="deliveries")
    alert = models.ForeignKey(Alert, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=16, choices=Event.choices)
    count = models.PositiveIntegerField(default=0, help_text="The alert's count when the message was made.")
    payload = models.JSONField(default=dict, help_text="The message, made once: every attempt sends the same.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="When a pending message is (re)tried; while an attempt runs, when its "
                                         "claim lapses and another sender may take it over.")
    last_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "alert deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="alert_delivery_due")]
        constraints = [models.UniqueConstraint(
            fields=["destination", "alert", "event", "count"], condition=models.Q(alert__isnull=False),
            name="one_alert_delivery_per_message")]

    def __str__(self) -> str:
        return f"{self.event} of alert {self.alert_id or '(test)'} to {self.destination_id}"
