"""Errors raised while reading simulator data: every message names the field (and file) at fault."""

from __future__ import annotations


class SpecError(ValueError):
    """A value in simulator data (a scenario, a size distribution) is invalid. `field` is a dotted path."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"field {field!r}: {problem}")


class ScenarioError(ValueError):
    """A scenario file cannot be loaded; the message names the file and, when known, the field."""

    def __init__(self, source: str, problem: str, field: str | None = None) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        where = f"scenario file {source!r}" + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")
