"""`evolve`: `dataclasses.replace` for the frozen records of the rollout fold's hot path.

The fold (`sessions_app.rollout.projection.apply_line`, the meter's transitions) makes two or three new records
per rollout line, for every append and every line of a rebuild. `dataclasses.replace` re-runs `__init__` with
every field as a keyword, about 2 µs each; copying the instance dictionary is a third of that. Only for frozen
dataclasses without `__post_init__`, `InitVar` fields or slots, which is what `MeterState` and `Header` are.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def evolve(record: T, **changes: Any) -> T:
    """A copy of the frozen dataclass `record` with `changes`; an unknown field name raises TypeError, as
    `dataclasses.replace` does."""
    if not changes.keys() <= record.__dataclass_fields__.keys():  # type: ignore[attr-defined]
        unknown = ", ".join(sorted(set(changes) - set(record.__dataclass_fields__)))  # type: ignore[attr-defined]
        raise TypeError(f"{type(record).__name__} has no field {unknown}")
    new = object.__new__(type(record))
    fields = new.__dict__
    fields.update(record.__dict__)
    fields.update(changes)
    return new
