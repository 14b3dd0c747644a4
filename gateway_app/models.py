"""The gateway's configuration and bookkeeping (issue 29): routes, client keys, which compactweb session a Codex
session's requests land in, compaction handles, and failed attempts.

A route is what an admin configures: the upstream Provider the requests go to (its key comes from the Provider's
`api_key_env`, never from the client), the policy that governs compaction, the compaction mode and the limits. A
Codex CLI authenticates with a gateway key of one route, sent as its API key; only the key's SHA-256 is stored.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from compactweb.model_bases import NamedConfig


class GatewayRoute(NamedConfig):
    class Mode(models.TextChoices):
        UPSTREAM = "upstream", "upstream: forward compaction requests and record what came back"
        COMPACTWEB = "compactweb", "compactweb: compute the replacement with the route's policy"

    name = models.SlugField(max_length=64, unique=True, help_text="Shown on the fleet board with each session.")
    provider = models.ForeignKey("compaction_app.Provider", on_delete=models.PROTECT, related_name="gateway_routes",
                                 help_text="The upstream Responses endpoint; its key comes from its api_key_env.")
    policy = models.ForeignKey("compaction_app.CompactionPolicy", on_delete=models.PROTECT,
                               related_name="gateway_routes", help_text="Governs the sessions of this route.")
    class Fallback(models.TextChoices):
        SUMMARISE = "summarise", "summarise: compact by local summarisation with the route's model instead"
        UPSTREAM = "upstream", "upstream: forward Codex's compaction request to the upstream instead"

    compaction_mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.UPSTREAM)
    compaction_fallback = models.CharField(
        max_length=16, choices=Fallback.choices, default=Fallback.SUMMARISE,
        help_text="compactweb mode: what the gateway does when the policy's compaction cannot leave Codex room to "
                  "work (the history at most half of what the client's limit leaves for it; e.g. masking with too "
                  "little left to mask). The compaction records which ran (docs/gateway.md).")
    max_body_bytes = models.PositiveIntegerField(default=8 * 1024 * 1024,
                                                 help_text="Bigger request bodies are refused with 413.")
    requests_per_minute = models.PositiveIntegerField(
        default=600, help_text="Per route, counted across every dashboard process (in the cache); more are "
                               "refused with 429 (0 = no limit).")
    pass_client_bearer = models.BooleanField(
        default=False, help_text="Send the client's own bearer token to the upstream instead of the Provider's key "
                                 "(clients then authenticate with a gateway key in the x-compactweb-gateway-key "
                                 "header). The token is never stored or logged.")
    allow_user_keys = models.BooleanField(
        default=False, help_text="Users' own gateway keys work on this route too, at /gateway/r/<name>/v1 "
                                 "(a route's keys work there and at /gateway/v1).")
    enabled = models.BooleanField(
        default=True, help_text="Off: the route takes no requests; its keys are refused and users' keys do not reach it.")


class GatewayKey(models.Model):
    """A client key, shown once when created and stored as its SHA-256 (`digest`): of one route (an admin's), or of
    one user (their own, for every route that allows user keys)."""

    route = models.ForeignKey(GatewayRoute, on_delete=models.CASCADE, related_name="keys", null=True, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="gateway_keys",
                             null=True, blank=True)
    client_name = models.CharField(max_length=100, help_text="Who uses it (a person, a CI runner): on the fleet board.")
    prefix = models.CharField(max_length=16, help_text="The key's first characters, to tell keys apart.")
    digest = models.CharField(max_length=64, unique=True)
    revoked = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["route", "client_name"]
        constraints = [models.CheckConstraint(
            condition=models.Q(route__isnull=False, user__isnull=True) | models.Q(route__isnull=True,
                                                                                  user__isnull=False),
            name="gateway_key_of_a_route_or_a_user")]

    def __str__(self) -> str:
        return f"{self.client_name} on {self.route or self.user} ({self.prefix}…)"

    def clean(self) -> None:
        if (self.route_id is None) == (self.user_id is None):
            raise ValidationError("A key belongs to a route or to a user: choose one of them.")


class GatewaySession(models.Model):
    """The compactweb session one Codex session's requests are recorded in, and what the gateway needs to go on
    recording it: the key it is grouped by and a compaction whose replacement the next request will show."""

    session = models.OneToOneField("sessions_app.Session", on_delete=models.PROTECT, related_name="gateway")
    route = models.ForeignKey(GatewayRoute, on_delete=models.PROTECT, related_name="sessions")
    key = models.ForeignKey(GatewayKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="sessions")
    client_name = models.CharField(max_length=100)
    group_key = models.CharField(max_length=300, help_text="thread:<id>, cache:<prompt_cache_key> or prefix:<hash>.")
    prefix_digest = models.CharField(max_length=64, blank=True, help_text="Digest of the first input items.")
    pending_compaction = models.JSONField(
        null=True, blank=True, help_text="A forwarded compaction whose replacement Codex sends with its next request.")
    requests = models.PositiveIntegerField(default=0)
    last_accepted = models.FloatField(
        null=True, blank=True, help_text="When the newest request recorded was accepted (Unix time, by the clock of "
                                         "the gateway process that took it): a record of a request accepted before "
                                         "it that does not extend the history is late, and changes nothing.")
    paused = models.BooleanField(default=False, help_text="An operator paused it: its next requests are refused.")
    paused_by = models.CharField(max_length=150, blank=True)
    compact_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        help_text="An operator asked for a compaction at the next request (cleared when it ran).")
    substitutions = models.JSONField(
        default=list, blank=True,
        help_text="What the gateway forwards in place of a prefix of Codex's history, oldest first: "
                  '{"kind": "compaction" | "rollback", "compaction_id", "prefix": [...], "replacement": [...]}.')
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        # A session is its caller's: one key's thread id never finds another key's session (docs/gateway.md).
        constraints = [models.UniqueConstraint(fields=["route", "key", "group_key"],
                                               name="gateway_session_unique_caller_group")]

    def __str__(self) -> str:
        return f"{self.client_name} via {self.route_id}: session #{self.session_id}"


class CompactionHandle(models.Model):
    """compactweb mode, v2: the opaque `encrypted_content` Codex got back, and the replacement it stands for."""

    handle = models.CharField(max_length=80, unique=True)
    gateway_session = models.ForeignKey(GatewaySession, on_delete=models.CASCADE, related_name="handles")
    replacement = models.JSONField(help_text="The replacement history the handle expands to.")
    compaction = models.ForeignKey("compaction_app.Compaction", on_delete=models.SET_NULL, null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.handle[:12]}… of gateway session {self.gateway_session_id}"


class GatewayAttempt(models.Model):
    """A request the gateway could not complete: an upstream error, a transport failure, a refused compaction or a
    client that went away mid-stream."""

    gateway_session = models.ForeignKey(GatewaySession, on_delete=models.CASCADE, null=True, blank=True,
                                        related_name="failed_attempts")
    route = models.ForeignKey(GatewayRoute, on_delete=models.CASCADE, related_name="failed_attempts")
    endpoint = models.CharField(max_length=64)
    request_kind = models.CharField(max_length=32, blank=True)
    status = models.PositiveSmallIntegerField(help_text="HTTP status the client got (0: the client went away).")
    error = models.TextField(blank=True)
    cut = models.BooleanField(
        default=False, help_text="The gateway process ended (killed, or stopped mid-stream) before the exchange's "
                                 "record was written: begun, never finished (gateway_app.journal).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.status} on route {self.route_id}"


class GatewayRateCount(models.Model):
    """Requests of one route in one minute (`window` = Unix minute) served by one dashboard process (`process`),
    when the deployment has no Redis: each process writes its own count and reads the others' (gateway_app.limits)."""

    route = models.ForeignKey(GatewayRoute, on_delete=models.CASCADE, related_name="+")
    window = models.BigIntegerField()
    process = models.CharField(max_length=32)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["route", "window", "process"],
                                               name="gateway_rate_unique_window")]

    def __str__(self) -> str:
        return f"route {self.route_id}, minute {self.window}, process {self.process}: {self.count}"


class GatewayInFlight(models.Model):
    """An exchange the gateway accepted and is forwarding, noted while it goes to the upstream and removed in the
    transaction that writes its record: one still here long after its process ended was cut by that process's end
    (a SIGKILL, a crash, a stop mid-stream), and the sweep turns it into a `cut` GatewayAttempt (gateway_app.journal)."""

    token = models.UUIDField(primary_key=True)
    route = models.ForeignKey(GatewayRoute, on_delete=models.CASCADE, related_name="+")
    key = models.ForeignKey(GatewayKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    group_key = models.CharField(max_length=300)
    endpoint = models.CharField(max_length=64)
    request_kind = models.CharField(max_length=32, blank=True)
    process = models.CharField(max_length=200, help_text="host:pid:start of the gateway process that took it.")
    begun = models.DateTimeField(db_index=True)
    # Durable-first recording (issue 41): the exchange as the recorder takes it (its request part, JSON text: a
    # history may hold characters PostgreSQL's jsonb refuses), written with the row; and once its answer ended
    # (`ended`), the answer's raw bytes and how it ended, written before the answer's end reaches the client. A
    # row whose process died after that is recorded whole by the sweep, not cut.
    request = models.TextField(blank=True)
    ended = models.BooleanField(default=False)
    status = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    answer_format = models.CharField(max_length=16, blank=True)
    answer = models.BinaryField(default=b"")

    def __str__(self) -> str:
        return f"{self.endpoint} on route {self.route_id} since {self.begun:%Y-%m-%d %H:%M:%S}"
