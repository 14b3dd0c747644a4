"""Writes to the configuration rows that other floors need (HackSoft services: keyword-only, one job each)."""

from __future__ import annotations

from compaction_app.models import Provider


def derived_provider(base: Provider, *, model: str, context_window: int) -> Provider:
    """`base` with another model and window (a scenario's model switch), created once and reused."""
    if base.model == model and base.context_window == context_window:
        return base
    name = f"{base.name} · {model} · {context_window}"[:100]
    skip = {"id", "name", "model", "context_window", "created", "updated"}
    defaults = {f.name: getattr(base, f.name) for f in Provider._meta.concrete_fields if f.name not in skip}
    provider, _ = Provider.objects.get_or_create(
        name=name, defaults={**defaults, "model": model, "context_window": context_window}
    )
    return provider
