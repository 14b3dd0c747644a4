"""Reads of the configuration rows (HackSoft selectors: services.py writes, selectors.py reads)."""

from __future__ import annotations

from django.db.models import QuerySet

from compaction_app.models import Provider


def chosen_providers() -> QuerySet[Provider]:
    """The providers an operator made, by name, for the pages' provider lists (issue 47 item 8): the rows
    compactweb derived from them for a scenario's model switch or an imported file's window
    (compaction_app.config_services.derived_provider) are reused, never offered."""
    return Provider.objects.filter(derived_from__isnull=True).order_by("name")
