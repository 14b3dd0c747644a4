"""The pages' Forms (sessions_app/web/forms.py): the analytics filter falls back to its defaults instead of
refusing a query string, and "Compact now" names what it refuses."""

from __future__ import annotations

import pytest

from sessions_app.web.forms import AnalyticsFilterForm, CompactNowForm


@pytest.mark.django_db
@pytest.mark.parametrize("query,expected", [
    ({}, ("30", "status")),
    ({"period": "", "by": "method"}, ("", "method")),  # an empty period is all time
    ({"period": "7", "by": "phase"}, ("7", "phase")),
    ({"period": "365", "by": "colour"}, ("30", "status")),  # unknown values: the defaults
])
def test_the_analytics_filter_reads_the_period_and_dimension_or_falls_back(query, expected):
    chosen = AnalyticsFilterForm(query).filters()
    assert (chosen["period"], chosen["dimension"]) == expected
    assert (chosen["policy_id"], chosen["provider_id"]) == (None, None)


@pytest.mark.django_db
def test_the_analytics_filter_keeps_a_known_policy_and_drops_an_unknown_one(policy):
    assert AnalyticsFilterForm({"policy": str(policy.pk)}).filters()["policy_id"] == policy.pk
    assert AnalyticsFilterForm({"policy": "987654"}).filters()["policy_id"] is None
    assert AnalyticsFilterForm({"policy": "x"}).filters()["policy_id"] is None


def test_compact_now_takes_a_known_method_and_strips_the_instructions():
    form = CompactNowForm({"strategy": "local", "instructions": "  keep names "})
    assert form.is_valid() and form.cleaned_data == {"strategy": "local", "instructions": "keep names"}
    assert CompactNowForm({}).is_valid()  # the policy's method, no instructions


@pytest.mark.parametrize("data,message", [
    ({"strategy": "magic"}, "Unknown strategy 'magic'."),
    ({"instructions": "x" * 20_001}, "Extra instructions are limited to 20,000 characters."),
])
def test_compact_now_names_what_it_refuses(data, message):
    form = CompactNowForm(data)
    assert not form.is_valid() and form.first_error() == message
