"""A derived provider (a scenario's or an import's other model or window) is named with its window written as the
pages write numbers, `embedded · gpt-5.1-codex · 128,000` (issue 47 item 7: the fleet's rows and the provider
filter showed `128000`). It is found again by what it derives, so a row named before keeps being reused, and
migration 0033 renames those rows; a name given by hand is left alone."""

from __future__ import annotations

import importlib

from django.apps import apps

from compaction_app.config_services import derived_provider
from compaction_app.models import Provider

rename = importlib.import_module("compaction_app.migrations.0033_derived_provider_names_separated").rename


def test_a_derived_provider_is_named_with_its_window_separated_and_reused(provider):
    derived = derived_provider(provider, model="gpt-5.1-codex", context_window=128_000)
    assert derived.name == f"{provider.name} · gpt-5.1-codex · 128,000"
    assert derived_provider(provider, model="gpt-5.1-codex", context_window=128_000).pk == derived.pk
    assert derived_provider(derived, model="gpt-5.1-codex", context_window=128_000).pk == derived.pk


def test_a_row_named_before_is_reused_and_renamed_by_the_migration(provider):
    old = Provider.objects.create(name=f"{provider.name} · gpt-5.1-codex · 128000", model="gpt-5.1-codex",
                                  context_window=128_000, base_url=provider.base_url, derived_from=provider)
    by_hand = Provider.objects.create(name="my codex window", model="gpt-5.1-codex-mini", context_window=32_000,
                                      base_url=provider.base_url, derived_from=provider)
    assert derived_provider(provider, model="gpt-5.1-codex", context_window=128_000).pk == old.pk  # no second row
    rename(apps, None)
    old.refresh_from_db()
    by_hand.refresh_from_db()
    assert old.name == f"{provider.name} · gpt-5.1-codex · 128,000"
    assert by_hand.name == "my codex window"
