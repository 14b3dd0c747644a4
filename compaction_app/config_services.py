"""Writes to the configuration rows that other floors need (HackSoft services: keyword-only, one job each)."""

from __future__ import annotations

from compaction_app.models import Provider


def derived_provider(base: Provider, *, model: str, context_window: int) -> Provider:
    """`base` with another model and window (a scenario's model switch), created once and reused."""
    if base.model == model and base.context_window == context_window:
        return base
    root = base.derived_from or base  # a derivation of a derivation is one of the provider the operator made
    if root.model == model and root.context_window == context_window:
        return root
    name = f"{root.name} · {model} · {context_window}"[:100]
    skip = {"id", "name", "model", "context_window", "created", "updated", "derived_from"}
    defaults = {f.name: getattr(base, f.name) for f in Provider._meta.concrete_fields if f.name not in skip}
    provider, _ = Provider.objects.get_or_create(
        name=name, defaults={**defaults, "model": model, "context_window": context_window, "derived_from": root}
    )
    return provider

