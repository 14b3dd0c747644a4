"""Forms of the operator's controls on the session page and the fleet board: fault injection and recovery."""

from __future__ import annotations

from django import forms

from compaction_app.engine.stuck import RECOVERIES
from compaction_app.providers.simulated.faults import MAX_SLOW_SECONDS, MAX_TIMES

# The simulated model's faults an operator can switch on for one session, in plain words.
FAULT_CHOICES = (
    ("", "none (clear)"),
    ("overloaded", "server overloaded (HTTP 429)"),
    ("server_error", "server error (HTTP 500)"),
    ("context_window_exceeded", "context window exceeded"),
    ("stream_closed", "stream closed before completion"),
    ("v2_zero", "remote v2 answers with no compaction item"),
    ("v2_two", "remote v2 answers with two compaction items"),
    ("compact_malformed", "remote v1 answers with a malformed body"),
    ("bad_json", "unparsable answer"),
    ("slow", "slow answers"),
)


class FaultInjectionForm(forms.Form):
    fault = forms.ChoiceField(choices=FAULT_CHOICES, required=False, label="Fault")
    times = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_TIMES, label="Requests",
        help_text="How many of the session's next requests fail; blank: every request.",
    )
    seconds = forms.FloatField(
        required=False, min_value=0.1, max_value=MAX_SLOW_SECONDS, label="Seconds",
        help_text="For slow answers: the delay of each answer.",
    )

    def clean(self):
        data = super().clean()
        if data.get("fault") == "slow" and not data.get("seconds"):
            self.add_error("seconds", "Slow answers need a number of seconds.")
        return data

    def spec(self, *, key: str) -> str:
        """The X-Sim-Fault value this form asks for ('' clears the faults); `key` makes the count start afresh."""
        fault = self.cleaned_data.get("fault") or ""
        if not fault:
            return ""
        spec = f"slow={self.cleaned_data['seconds']:g}" if fault == "slow" else fault
        if self.cleaned_data.get("times"):
            spec += f";times={self.cleaned_data['times']};key={key}"
        return spec


class RecoverForm(forms.Form):
    method = forms.ChoiceField(choices=tuple(RECOVERIES.items()))
