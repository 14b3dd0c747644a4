"""Abstract models for field sets that travel together across both apps' configuration."""

from __future__ import annotations

from typing import Self

from django.db import models


class NamedConfig(models.Model):
    """A configuration row an admin names and picks by name (a provider, a prompt, a hook, a policy, a gateway
    route): listed in name order, shown as its name, with when it was made and last changed. Each keeps its own
    `name` field: what a name may be differs."""

    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class SingleRowSettings(models.Model):
    """Settings kept in one row, edited in the admin (compactweb.read_only_admin.SingleRowAdmin): `current()`
    reads it, made with the defaults the first time it is asked for."""

    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    @classmethod
    def current(cls) -> Self:
        return cls.objects.get_or_create(pk=1)[0]
