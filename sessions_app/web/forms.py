"""Django Forms for the pages' query strings and POSTs: parsing and validation in one place, no hand-rolled int
parsing in the views."""

from __future__ import annotations

from django import forms

from compaction_app.engine.vocabulary import MAX_EXTRA_INSTRUCTIONS
from compaction_app.models import AuditEntry, CompactionPolicy, Provider
from compactweb.converters import MAX_ID
from sessions_app.fleet.runtime import MAX_FLEET_SIZE
from sessions_app.web.pages import STRATEGIES


class AuditFilterForm(forms.Form):
    """The audit log's filter: an action and a session id, each optional; an unknown value filters nothing."""

    action = forms.ChoiceField(choices=[("", "any"), *AuditEntry.Action.choices], required=False)
    session = forms.IntegerField(min_value=1, max_value=MAX_ID, required=False)

    def filters(self) -> dict:
        self.is_valid()  # an invalid field is left out of cleaned_data, so it filters nothing
        return {"action": self.cleaned_data.get("action") or "", "session": self.cleaned_data.get("session")}


# The analytics page's periods (days; "" = all time) and the dimensions its bars can be split by.
PERIODS = (("1", "last 24 hours"), ("7", "last 7 days"), ("30", "last 30 days"), ("", "all time"))
DEFAULT_PERIOD = "30"
DIMENSIONS = ("status", "trigger", "reason", "implementation", "phase", "method", "strategy")


class AnalyticsFilterForm(forms.Form):
    """The analytics page's filter: a policy and a provider (each optional), a period (30 days unless given; an
    empty one is all time) and the dimension the bars are split by (status unless given). An unknown or malformed
    value falls back to its default: the page never refuses a query string."""

    policy = forms.ModelChoiceField(queryset=CompactionPolicy.objects.all(), required=False)
    provider = forms.ModelChoiceField(queryset=Provider.objects.all(), required=False)
    period = forms.ChoiceField(choices=PERIODS, required=False)
    by = forms.ChoiceField(choices=[(d, d) for d in DIMENSIONS], required=False)

    def filters(self) -> dict:
        self.is_valid()  # an invalid field is left out of cleaned_data: its default applies
        policy, provider = self.cleaned_data.get("policy"), self.cleaned_data.get("provider")
        period = self.cleaned_data.get("period") if "period" in self.data else DEFAULT_PERIOD
        return {"policy_id": policy.pk if policy else None, "provider_id": provider.pk if provider else None,
                "period": DEFAULT_PERIOD if period is None else period,
                "dimension": self.cleaned_data.get("by") or DIMENSIONS[0]}


class CompactNowForm(forms.Form):
    """The session page's "Compact now": a method (blank: the policy's) and optional extra instructions."""

    strategy = forms.ChoiceField(choices=STRATEGIES, required=False,
                                 error_messages={"invalid_choice": "Unknown strategy %(value)r."})
    instructions = forms.CharField(
        required=False, max_length=MAX_EXTRA_INSTRUCTIONS,
        error_messages={"max_length": f"Extra instructions are limited to {MAX_EXTRA_INSTRUCTIONS:,} characters."})

    def first_error(self) -> str:
        return next(iter(self.errors.values()))[0]


class ReplayForm(forms.Form):
    """Replay a session under another policy (and optionally another provider)."""

    policy = forms.ModelChoiceField(queryset=CompactionPolicy.objects.all(),
                                    error_messages={"required": "Choose the policy to replay under.",
                                                    "invalid_choice": "Choose the policy to replay under."})
    provider = forms.ModelChoiceField(queryset=Provider.objects.all(), required=False)


class ImportRolloutForm(forms.Form):
    """Upload a Codex rollout .jsonl file; provider and policy default to the embedded ones."""

    file = forms.FileField(error_messages={"required": "Choose a rollout file (.jsonl) to import."})
    title = forms.CharField(max_length=200, required=False, strip=True)
    provider = forms.ModelChoiceField(queryset=Provider.objects.all(), required=False)
    policy = forms.ModelChoiceField(queryset=CompactionPolicy.objects.all(), required=False)
    new_thread_id = forms.BooleanField(required=False)
    strict = forms.BooleanField(required=False)


class ReasonForm(forms.Form):
    """The reason a support user gives for a rollback or a redo (kept in the audit log)."""

    reason = forms.CharField(max_length=2000, required=False, strip=True)


class FleetStartForm(forms.Form):
    """Start simulated sessions: scenario, count, provider, policy, pacing, and optionally a context window (blank:
    the window the scenario suggests)."""

    MAX_FLEET = MAX_FLEET_SIZE  # the same cap as the API's (issue 47: the form said 50 while the API took 200)
    MIN_WINDOW = 2000  # smaller windows cannot hold a scenario's initial context and one turn

    scenario = forms.ChoiceField(choices=(), error_messages={"invalid_choice": "Choose a known scenario."})
    count = forms.IntegerField(min_value=1, max_value=MAX_FLEET)
    provider = forms.ModelChoiceField(queryset=Provider.objects.all())
    policy = forms.ModelChoiceField(queryset=CompactionPolicy.objects.all())
    turns_per_minute = forms.FloatField(required=False, min_value=0.0001)
    context_window = forms.IntegerField(
        required=False, min_value=MIN_WINDOW,
        error_messages={"min_value": f"A context window needs at least {MIN_WINDOW:,} tokens."},
    )
    loop = forms.BooleanField(required=False)

    def __init__(self, *args, scenarios: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scenario"].choices = [(name, name) for name in scenarios]

    def first_error(self) -> str:
        field, errors = next(iter(self.errors.items()))
        return errors[0] if field in ("scenario", "context_window") else (
            f"Choose a provider, a policy, 1 to {self.MAX_FLEET} sessions, whole numbers of tokens and a positive "
            f"speed ({field}: {errors[0]})"
        )


class HistoryPageForm(forms.Form):
    """The session page's "show older" request: the page of history items before this position."""

    before = forms.IntegerField(min_value=0, max_value=MAX_ID)
