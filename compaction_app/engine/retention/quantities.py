"""Numbers with units, compared by what they measure: "1.8 GiB" states 1843 MiB, "1843 KiB" does not.

A quantity is a number and a unit of one dimension (bytes, time). Two statements agree when their values in the
dimension's base unit differ by no more than the rounding the writer's number allows (half a unit of its last
digit: "1.8 GiB" covers 1.75-1.85 GiB), plus half a percent across units (a conversion rounded once more: 1843 MiB
is 1932 MB).
A hand-written table of the units tool outputs and summaries use; pint would know many more, at the cost of a
registry loaded per process for two dimensions.

Plain Python; the same texts always give the same verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from compaction_app.engine.retention.values import clock_seconds

BYTES, SECONDS, PERCENT, RATE = "bytes", "seconds", "percent", "per second"

_UNITS: dict[str, tuple[str, float]] = {}
for names, dimension, factor in (
    (("b", "byte", "bytes"), BYTES, 1),
    (("kb", "kilobyte", "kilobytes"), BYTES, 1e3),
    (("mb", "megabyte", "megabytes"), BYTES, 1e6),
    (("gb", "gigabyte", "gigabytes"), BYTES, 1e9),
    (("tb", "terabyte", "terabytes"), BYTES, 1e12),
    (("kib", "kibibyte", "kibibytes", "k"), BYTES, 2**10),
    (("mib", "mebibyte", "mebibytes", "m"), BYTES, 2**20),
    (("gib", "gibibyte", "gibibytes", "g"), BYTES, 2**30),
    (("tib", "tebibyte", "tebibytes"), BYTES, 2**40),
    # Kubernetes' binary suffixes (`1432Mi`), glued to the number only.
    (("ki",), BYTES, 2**10), (("mi",), BYTES, 2**20), (("gi",), BYTES, 2**30), (("ti",), BYTES, 2**40),
    # French octets: "3,4 Go" is 3.4 GB ("to" only glued: "5 to 10" is no size).
    (("o", "octet", "octets"), BYTES, 1), (("ko",), BYTES, 1e3), (("mo",), BYTES, 1e6), (("go",), BYTES, 1e9),
    (("to",), BYTES, 1e12),
    (("ns", "nanosecond", "nanoseconds"), SECONDS, 1e-9),
    (("us", "µs", "microsecond", "microseconds"), SECONDS, 1e-6),
    # Time units in English and in the summary languages met so far (Spanish, French, German, Italian, Portuguese).
    (("ms", "millisecond", "milliseconds", "msec", "msecs", "milisegundo", "milisegundos", "milliseconde",
      "millisecondes", "millisekunde", "millisekunden", "millisecondo", "millisecondi"), SECONDS, 1e-3),
    (("s", "sec", "secs", "second", "seconds", "segundo", "segundos", "seconde", "secondes", "sekunde", "sekunden",
      "secondo", "secondi", "seg", "sek"), SECONDS, 1),
    (("min", "mins", "minute", "minutes", "minuto", "minutos", "minuten", "minuti"), SECONDS, 60),
    (("h", "hr", "hrs", "hour", "hours", "hora", "horas", "heure", "heures", "stunde", "stunden"), SECONDS, 3600),
    (("d", "day", "days", "jour", "jours", "tag", "tage", "tagen", "giorni"), SECONDS, 86400),
    (("%", "percent", "pct"), PERCENT, 1),
):
    for name in names:
        _UNITS[name] = (dimension, factor)
# Single letters (but "s") read as units only when glued to the number ("512M", "2h"): "5 m" may be anything.
_GLUED_ONLY = frozenset({"k", "m", "g", "h", "d", "ki", "mi", "gi", "ti", "o", "to", "tag"})

_QUANTITY = re.compile(r"(?<![\w.])(-?\d+(?:[.,]\d+)*)(\s?)([a-zµ]+\b|%)", re.IGNORECASE)
# A duration in several units, largest first: bash's `time` (`2m14.310s`), Go's (`1h2m3.5s`), a writer's
# ("2 min 14 s", "1 h 5 min").
_DURATION_PART = r"\d+(?:\.\d+)?\s?(?:h|hr|hrs|hours?|m|min|mins|minutes?|s|sec|secs|seconds?|ms)"
_COMPOUND = re.compile(rf"(?<![\w.])({_DURATION_PART})(?:(?:\s|\s?and\s)?({_DURATION_PART})){{1,2}}\b")
_PART = re.compile(r"(\d+(?:\.\d+)?)\s?([a-z]+)", re.IGNORECASE)
# A bare number; a sentence's full stop after it is not a decimal point ("... = 3000.").
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*(?!\w|\.\d)")
RELATIVE_SLACK = 0.005
# A rate: a number, maybe what it counts (a word or two in any alphabet, not a currency), and a time unit after "per", "/" or "a"
# ("170 requests per second", "10,200 requests/min", "175 req/s", "3 deploys a day", "1270 pedidos por segundo"), or
# a unit that says it (`rps`, `qps`). Compared per second, so "170 requests per second" is "10,200 requests/min".
_RATE = re.compile(r"(?<![\w.])(?P<n>\d+(?:[.,]\d+)*)\s?(?:(?!(?:EUR|USD|GBP|euros?|dollars?)\b)[^\W\d_]+\s?){0,2}"
                   r"(?:/\s?|\b(?:per|por|par|pro)\s|\ba\s)(?P<unit>s|sec|seg|second|segundo|seconde|sekunde|min|"
                   r"minute|minuto|minuut|h|hr|hour|hora|heure|stunde|uur|day)s?\b"
                   r"|(?<![\w.])(?P<n2>\d+(?:[.,]\d+)*)\s?(?:rps|qps)\b", re.IGNORECASE)
# Decimal and binary prefixes of the same rank, which writers use for one another (kB/KiB ... TB/TiB).
PREFIX_TWINS = {1e3: 2**10, 1e6: 2**20, 1e9: 2**30, 1e12: 2**40}
PREFIX_TWINS |= {binary: decimal for decimal, binary in list(PREFIX_TWINS.items())}
_RATE_SECONDS = {"s": 1, "sec": 1, "second": 1, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600,
                 "day": 86400}
# The summary languages met so far say it too: "pedidos por segundo", "requêtes par seconde", "pro Sekunde".
_RATE_SECONDS |= {"seg": 1, "segundo": 1, "seconde": 1, "sekunde": 1, "minuto": 60, "minuut": 60, "hora": 3600,
                  "heure": 3600, "stunde": 3600, "uur": 3600}


@lru_cache(maxsize=16384)
def rates(text: str) -> tuple[Quantity, ...]:
    """Every rate of a text (`_RATE`), per second."""
    found = []
    for match in _RATE.finditer(text):
        parsed = _number(match.group("n") or match.group("n2"))
        if parsed is None:
            continue
        seconds = _RATE_SECONDS[(match.group("unit") or "s").lower()]
        found.append(Quantity(number=parsed[0], dimension=RATE, base=parsed[0] / seconds,
                              half_step=parsed[1] / seconds, factor=1 / seconds))
    return tuple(found)


def rate_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _RATE.finditer(text)]


@dataclass(frozen=True)
class Quantity:
    number: float
    dimension: str
    base: float  # the value in the dimension's base unit (bytes, seconds)
    half_step: float  # half a unit of the number's last digit, in the base unit
    factor: float  # the unit's size in the base unit

    def agrees(self, other: Quantity) -> bool:
        if self.dimension != other.dimension:
            return False
        if self._within(other):
            return True
        # A size's prefix is read both ways: "3,1 Go" or "3.1 GB" is what most writers call du's `3.1G` (GiB), and
        # a prefix of another magnitude ("3.1 MB") still disagrees.
        other_way = self.prefix_swapped()
        return other_way is not None and other_way._within(other)

    def _within(self, other: Quantity) -> bool:
        # In the same unit only the writer's rounding; across units a conversion may round once more.
        converted = RELATIVE_SLACK * max(abs(self.base), abs(other.base)) if self.factor != other.factor else 0
        slack = max(self.half_step, other.half_step) + converted
        return abs(self.base - other.base) <= slack

    def prefix_swapped(self) -> Quantity | None:
        """The same number with a size's decimal prefix read as binary or the other way round (GB as GiB), or
        None for a unit without such a twin."""
        twin = PREFIX_TWINS.get(self.factor) if self.dimension == BYTES else None
        if twin is None:
            return None
        return Quantity(number=self.number, dimension=BYTES, base=self.number * twin,
                        half_step=self.half_step * twin / self.factor, factor=twin)


def _number(text: str) -> tuple[float, float] | None:
    """The number and half a unit of its last digit ("1,843" is 1843; "1.8" is 1.8 with half step 0.05)."""
    clean = text.replace(",", "") if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", text) else text.replace(",", ".")
    try:
        value = float(clean)
    except ValueError:
        return None
    decimals = len(clean.split(".", 1)[1]) if "." in clean else 0
    return value, 0.5 * 10 ** -decimals


def _compound(text: str) -> Quantity | None:
    """A duration written in several units (`2m14.310s`, "2 min 14 s") as one quantity: the sum, rounded as its
    last part is, in that part's unit."""
    parts = _PART.findall(text)
    # In a duration "m" is minutes (alone, "512M" is a size).
    factors = [60.0 if unit.lower() == "m" else _UNITS.get(unit.lower(), ("", 0.0))[1] for _, unit in parts]
    if len(parts) < 2:
        return None
    if any(a <= b for a, b in zip(factors, factors[1:], strict=False)):  # largest unit first, each once
        return None
    parsed = _number(parts[-1][0])
    if parsed is None:
        return None
    base = sum(float(number) * factor for (number, _), factor in zip(parts, factors, strict=True))
    return Quantity(number=base / factors[-1], dimension=SECONDS, base=base, half_step=parsed[1] * factors[-1],
                    factor=factors[-1])


def quantities(text: str) -> list[Quantity]:
    """Every number-with-unit of a text, in order (a duration in several units also as one)."""
    return list(_quantities(text))


@lru_cache(maxsize=16384)
def _quantities(text: str) -> tuple[Quantity, ...]:
    """`quantities`, read once per text (a window's segments are asked about every fact)."""
    found, spans = [], []
    for match in _COMPOUND.finditer(text):
        compound = _compound(match.group())
        if compound is not None:  # its parts are not quantities of their own ("2 min" of "2 min 31 s")
            found.append(compound)
            spans.append(match.span())
    for match in _QUANTITY.finditer(text):
        if any(start <= match.start() < end for start, end in spans):
            continue
        number, space, unit = match.groups()
        unit = unit.lower()
        if unit not in _UNITS or (space and unit in _GLUED_ONLY):
            continue
        parsed = _number(number)
        if parsed is None:
            continue
        value, half = parsed
        dimension, factor = _UNITS[unit]
        found.append(Quantity(number=value, dimension=dimension, base=value * factor, half_step=half * factor,
                              factor=factor))
    return tuple(found)


def quantity_of(text: str) -> Quantity | None:
    """The quantity a value states when it is one number with a unit ("1843 MiB", "90 s", "512M", "2m14.310s"),
    else None."""
    compound = _COMPOUND.fullmatch(text.strip())
    if compound is not None:
        return _compound(compound.group())
    found = quantities(text)
    match = _QUANTITY.fullmatch(text.strip())
    return found[0] if len(found) == 1 and match is not None else None


def states_quantity(text: str, wanted: Quantity) -> bool:
    """Whether a text states `wanted`: a quantity of the same dimension that agrees with it, or the bare number
    with no unit after it (the unit left implicit, not a wrong one)."""
    if wanted.dimension == RATE:  # a rate in any time unit, or its number with nothing after it
        starts = {m.start("n") if m.group("n") else m.start("n2") for m in _RATE.finditer(text)}
        return any(q.agrees(wanted) for q in rates(text)) or any(
            _number(m.group()) is not None and _number(m.group())[0] == wanted.number and m.start() not in starts
            and m.start() not in {q.start(1) for q in _QUANTITY.finditer(text)} for m in _NUMBER.finditer(text))
    if any(q.agrees(wanted) for q in _quantities(text)):
        return True
    if wanted.dimension == SECONDS and any(q.agrees(wanted) for q in _letter_durations(text)):
        return True
    # A duration written as a clock ("finished in 1:12:09" for `elapsed=1h12m09s`).
    if wanted.dimension == SECONDS and any(abs(seconds - wanted.base) <= max(half, wanted.half_step)
                                           for seconds, half in clock_seconds(text)):
        return True
    return wanted.number in _bare_numbers(text)


# A duration's one-letter unit as configs and writers use it: glued "m" ("60m" is minutes in an ini file, where alone
# "512m" would be a size) and a letter after a space ("1 h", "1,25 h"). Read only against a wanted duration, where
# no size is meant.
_LETTER_DURATION = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)?)\s?([hmd])\b", re.IGNORECASE)
_LETTER_SECONDS = {"h": 3600.0, "m": 60.0, "d": 86400.0}


@lru_cache(maxsize=16384)
def _letter_durations(text: str) -> tuple[Quantity, ...]:
    found = []
    for match in _LETTER_DURATION.finditer(text):
        parsed = _number(match.group(1))
        if parsed is None:
            continue
        factor = _LETTER_SECONDS[match.group(2).lower()]
        found.append(Quantity(number=parsed[0], dimension=SECONDS, base=parsed[0] * factor,
                              half_step=parsed[1] * factor, factor=factor))
    return tuple(found)


# A plain number this large may be a count of bytes (`MemoryMax=1610612736`, `ls -l`'s size), which a writer states
# with a unit ("1536 MiB", "1.5G").
MIN_BYTE_COUNT = 1024


def states_byte_count(text: str, count: float) -> bool:
    """Whether a text states a whole number of bytes with a size unit that agrees with it."""
    if count < MIN_BYTE_COUNT or count != int(count):
        return False
    return any(q.dimension == BYTES and q.factor != 1 and abs(q.base - count) <= _byte_slack(q, count)
               for q in _quantities(text))


def _byte_slack(said: Quantity, count: float) -> float:
    """How far a size may be from an exact byte count: a conversion's rounding, and the writer's last digit when
    the size has two significant digits or more ("1.5G" for 1610612736, not "2G")."""
    slack = RELATIVE_SLACK * count
    return max(slack, said.half_step) if said.half_step <= 0.05 * abs(said.base) else slack


@lru_cache(maxsize=16384)
def _bare_numbers(text: str) -> frozenset[float]:
    """The numbers of a text with no unit after them."""
    with_unit = {m.start(1) for m in _QUANTITY.finditer(text) if m.group(3).lower() in _UNITS}
    found = set()
    for match in _NUMBER.finditer(text):
        parsed = _number(match.group())
        if parsed is not None and match.start() not in with_unit:
            found.add(parsed[0])
    return frozenset(found)
