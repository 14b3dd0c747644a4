"""What the management commands share: a provider or policy named on the command line by id or name."""

from __future__ import annotations

from django.core.management.base import CommandError


def row_by_id_or_name(model, value: str | None):
    """The row whose id (all digits) or name is `value`; None for None. An unknown one stops the command and names
    the rows there are."""
    if value is None:
        return None
    rows = model.objects.filter(pk=int(value)) if value.isdigit() else model.objects.filter(name=value)
    row = rows.first()
    if row is None:
        names = ", ".join(model.objects.values_list("name", flat=True)) or "none yet (run setup_demo)"
        raise CommandError(f"no {model._meta.verbose_name} {value!r} (give its id or name); known: {names}")
    return row
