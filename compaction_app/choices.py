"""Django choices built from the domain vocabulary (compaction_app.engine.vocabulary), so each is defined once."""

from __future__ import annotations

from enum import StrEnum

from django.db import models

from compaction_app.engine.vocabulary import LABELS


def text_choices(vocabulary: type[StrEnum], *, exclude: tuple[StrEnum, ...] = ()) -> type[models.TextChoices]:
    """A TextChoices class with the vocabulary's members, values and labels (members in `exclude` left out)."""
    labels = LABELS[vocabulary]
    members = [(m.name, (m.value, labels[m.value])) for m in vocabulary if m not in exclude]
    return models.TextChoices(vocabulary.__name__, members)
