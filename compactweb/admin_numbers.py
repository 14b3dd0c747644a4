"""Counts in the admin written as the pages write them, with thousands separators (issue 47 item 7: `36291` in the
compaction list beside `36,291` on the inspector).

Django writes a model's integer with a separator only under the global USE_THOUSAND_SEPARATOR setting, which
would also put commas into every `{{ id }}` the templates write into URLs and data attributes. So the admins that
show counts swap each integer column of their list, and each integer field they show read-only, for a display of
the same name, label and ordering that groups the digits. Editable fields stay inputs: a form posts what it shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import models


def _display(name: str, label: str) -> Callable[[Any], str | None]:
    def shown(obj: Any) -> str | None:
        value = getattr(obj, name)
        return None if value is None else f"{value:,}"  # None: the admin's empty value ("-")

    shown.__name__ = name
    shown.short_description = label  # type: ignore[attr-defined]
    shown.admin_order_field = name  # type: ignore[attr-defined]
    return shown


class SeparatedNumbers:
    """A ModelAdmin mixin: integer columns and read-only integer fields with thousands separators."""

    def _numbers(self) -> dict[str, Callable]:
        # One display per field for the admin's life: the change form finds a read-only field by identity.
        shown = self.__dict__.get("_separated")
        if shown is None:
            shown = {f.name: _display(f.name, f.verbose_name) for f in self.model._meta.concrete_fields
                     if isinstance(f, models.IntegerField) and not f.primary_key}
            self.__dict__["_separated"] = shown
        return shown

    def _swap(self, names, only: set | None) -> list:
        numbers = self._numbers()
        swapped = []
        for name in names:
            if isinstance(name, (list, tuple)):
                swapped.append(type(name)(self._swap(name, only)))
            elif isinstance(name, str) and name in numbers and (only is None or name in only):
                swapped.append(numbers[name])
            else:
                swapped.append(name)
        return swapped

    def get_list_display(self, request):
        editable = set(getattr(self, "list_editable", ()) or ())
        links = set(getattr(self, "list_display_links", ()) or ())
        keep = editable | links
        return self._swap(super().get_list_display(request), {n for n in self._numbers() if n not in keep})

    def _shown_read_only(self, request, obj) -> set[str] | None:
        """The integer fields the change page shows read-only (None: every field, a view-only page)."""
        if obj is not None and not self.has_change_permission(request, obj):
            return None
        return {n for n in super().get_readonly_fields(request, obj) if isinstance(n, str)}

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return self._swap(fields, None)

    def get_fieldsets(self, request, obj=None):
        only = self._shown_read_only(request, obj)
        return [(title, {**options, "fields": self._swap(options["fields"], only)})
                for title, options in super().get_fieldsets(request, obj)]
