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
    # Found by what it derives, not by its name: the name is for the pages (the window written as they write
    # numbers, issue 47 item 7), and rows named before that keep theirs until migration 0033 renames them.
    found = (Provider.objects.filter(derived_from=root, model=model, context_window=context_window)
             .order_by("pk").first())
    if found is not None:
        return found
    skip = {"id", "name", "model", "context_window", "created", "updated", "derived_from"}
    defaults = {f.name: getattr(base, f.name) for f in Provider._meta.concrete_fields if f.name not in skip}
    provider, _ = Provider.objects.get_or_create(
        name=derived_name(root.name, model, context_window),
        defaults={**defaults, "model": model, "context_window": context_window, "derived_from": root},
    )
    return provider


def derived_name(root: str, model: str, context_window: int) -> str:
    """A derived provider's name: its provider's, its model and its window (`embedded · gpt-5.1-codex · 128,000`)."""
    return f"{root} · {model} · {context_window:,}"[:100]

