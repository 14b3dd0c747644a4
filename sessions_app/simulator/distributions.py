"""Output-size distributions for simulated tools and pasted user text (issue 5).

A distribution draws a size in one unit, `tokens` (counted with the session's tokenizer) or `bytes` (UTF-8). Sizes
are drawn from a caller-supplied `random.Random`, so the same seed gives the same sizes.

Scenario data writes a distribution as a table:
    {kind = "fixed", value = 5000}
    {kind = "uniform", low = 200, high = 2000, unit = "bytes"}
    {kind = "lognormal", median = 800, sigma = 1.0, cap = 30000}
    {kind = "mixture", components = [{weight = 9, kind = "uniform", low = 100, high = 900},
                                     {weight = 1, kind = "fixed", value = 120000}]}
The mixture is how "mostly small, sometimes huge" is written.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import SpecError

UNITS = ("tokens", "bytes")
KINDS = ("fixed", "uniform", "lognormal", "mixture")
# Nothing a simulated tool prints should exceed this; it keeps a typo (an extra zero or three) from eating memory.
MAX_SIZE = 2_000_000


class Sampler(Protocol):
    def sample(self, rng: random.Random) -> int: ...


@dataclass(frozen=True)
class Fixed:
    value: int

    def sample(self, rng: random.Random) -> int:
        return self.value


@dataclass(frozen=True)
class Uniform:
    low: int
    high: int

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)


@dataclass(frozen=True)
class LogNormal:
    """Log-normal around `median` (the distribution's median) with shape `sigma`, clipped to [floor, cap]."""

    median: int
    sigma: float
    cap: int
    floor: int = 1

    def sample(self, rng: random.Random) -> int:
        value = rng.lognormvariate(math.log(self.median), self.sigma)
        return int(min(self.cap, max(self.floor, round(value))))


@dataclass(frozen=True)
class Mixture:
    """Pick one component by weight, then draw from it."""

    weights: tuple[float, ...]
    components: tuple[Sampler, ...]

    def sample(self, rng: random.Random) -> int:
        (component,) = rng.choices(self.components, weights=self.weights, k=1)
        return component.sample(rng)


@dataclass(frozen=True)
class SizeDistribution:
    """A sampler plus the unit its numbers are in."""

    sampler: Sampler
    unit: str = "tokens"

    def sample(self, rng: random.Random) -> Size:
        return Size(self.sampler.sample(rng), self.unit)


@dataclass(frozen=True)
class Size:
    """An amount of text to produce: `amount` tokens or bytes."""

    amount: int
    unit: str = "tokens"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}")
        if not 0 <= self.amount <= MAX_SIZE:
            raise ValueError(f"size must be in 0..{MAX_SIZE}, got {self.amount}")


def fixed(value: int, unit: str = "tokens") -> SizeDistribution:
    return parse_distribution({"kind": "fixed", "value": value, "unit": unit}, "size")


def _int(data: Mapping[str, Any], key: str, field: str, *, minimum: int = 0) -> int:
    if key not in data:
        raise SpecError(f"{field}.{key}", "is required")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{field}.{key}", f"must be an integer, got {value!r}")
    if not minimum <= value <= MAX_SIZE:
        raise SpecError(f"{field}.{key}", f"must be in {minimum}..{MAX_SIZE}, got {value}")
    return value


def _positive_float(data: Mapping[str, Any], key: str, field: str) -> float:
    if key not in data:
        raise SpecError(f"{field}.{key}", "is required")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or math.isinf(value):
        raise SpecError(f"{field}.{key}", f"must be a positive number, got {value!r}")
    return float(value)


_ALLOWED_KEYS = {
    "fixed": {"value"},
    "uniform": {"low", "high"},
    "lognormal": {"median", "sigma", "cap", "floor"},
    "mixture": {"components"},
}


def _parse_sampler(data: Any, field: str, *, in_mixture: bool) -> Sampler:
    if not isinstance(data, Mapping):
        raise SpecError(field, f"must be a table with a 'kind', got {data!r}")
    kind = data.get("kind")
    if kind not in KINDS:
        raise SpecError(f"{field}.kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    allowed = _ALLOWED_KEYS[kind] | {"kind"} | ({"weight"} if in_mixture else {"unit"})
    extra = sorted(set(data) - allowed)
    if extra:
        raise SpecError(f"{field}.{extra[0]}", f"is not a field of a {kind!r} distribution")
    if kind == "fixed":
        return Fixed(_int(data, "value", field))
    if kind == "uniform":
        low, high = _int(data, "low", field), _int(data, "high", field)
        if low > high:
            raise SpecError(f"{field}.high", f"must be >= low ({low}), got {high}")
        return Uniform(low, high)
    if kind == "lognormal":
        median = _int(data, "median", field, minimum=1)
        sigma = _positive_float(data, "sigma", field)
        cap = _int(data, "cap", field, minimum=1)
        floor = _int(data, "floor", field) if "floor" in data else 1
        if floor > cap:
            raise SpecError(f"{field}.cap", f"must be >= floor ({floor}), got {cap}")
        return LogNormal(median, sigma, cap, floor)
    components = data.get("components")
    if not isinstance(components, list) or not components:
        raise SpecError(f"{field}.components", "must be a non-empty list of distributions with a 'weight'")
    weights, samplers = [], []
    for i, component in enumerate(components):
        where = f"{field}.components[{i}]"
        if not isinstance(component, Mapping):
            raise SpecError(where, f"must be a table, got {component!r}")
        if "unit" in component:
            raise SpecError(f"{where}.unit", "set the unit once, on the mixture")
        weights.append(_positive_float(component, "weight", where))
        samplers.append(_parse_sampler(component, where, in_mixture=True))
    return Mixture(tuple(weights), tuple(samplers))


def parse_distribution(data: Any, field: str) -> SizeDistribution:
    """Build a SizeDistribution from scenario data; raises SpecError naming the offending field."""
    sampler = _parse_sampler(data, field, in_mixture=False)
    unit = data.get("unit", "tokens")
    if unit not in UNITS:
        raise SpecError(f"{field}.unit", f"must be one of {', '.join(UNITS)}, got {unit!r}")
    return SizeDistribution(sampler, unit)
