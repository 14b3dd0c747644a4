"""Stated values by what they are: dates, versions, numbers, durations, compared through a normalised form.

A summary restates a value in its own format: `notAfter=Mar 14 09:30:00 2027 GMT` as "expires 2027-03-14",
`go1.22.7` as "Go 1.22.7", `0.9131` as "91.31%", `18,204,551 rows` as "18.2M rows", `elapsed=1h12m09s` as
"1:12:09". Each value is read into a normal form that does not depend on how it was written, and a value is stated
by a text when the text holds a value of the same form that agrees with it:

- a **date** (ISO `2027-03-14`, `2027/03/14`, `Mar 14 2027`, `14 March 2027`, `March 14, 2027`, a timestamp's date
  part) is its ISO day;
- a **version** (`v1.2.3`, `go1.22.7`, `21.0.4+7`, `release-2.4.1`: digits and dots, two dots or more, or one after
  a letter prefix or the word version) is its dotted digits, compared exactly: 1.22 is not 1.22.7;
- a **number** (`1,234`, `1_234`, `1.2k`, `18.2M`, `18.2 million`, `0.9131`, `91.31%`) is its value and the
  rounding its writer's last digit allows, so a rounded restatement agrees and a neighbouring value does not; a
  fraction and a percentage agree (0.9131 and 91.31%);
- a **duration** as a clock (`1:12:09`, `12:09`) is a number of seconds, when it is compared with a duration.

Numbers with units (bytes, seconds, percent) are `quantities.py`'s. Paths, identifiers and quoted strings are
compared as tokens (`match.py`), which already ignores case and quoting.

Plain Python; the same texts always give the same verdict.
"""

from __future__ import annotations

import re
from functools import lru_cache

MONTHS = {name: index for index, names in enumerate((
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
    ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
    ("dec", "december")), start=1) for name in names}
_MONTH = r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
         r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_ISO_DATE = re.compile(r"(?<![\d.])(?P<y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})(?![\d])")
# "Mar 14 09:30:00 2027", "March 14, 2027", "Mar 14 2027" (openssl, date(1), prose).
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?:\d{{1,2}}:\d{{2}}(?::\d{{2}})?\s+)?"
                          r"(?:[A-Z]{3,4}\s+)?(?P<y>\d{4})\b", re.IGNORECASE)
# "14 March 2027", "14 Mar, 2027", "14-Mar-2027".
_DAY_FIRST = re.compile(rf"(?<![\d.])(?P<d>\d{{1,2}})(?:st|nd|rd|th)?[\s-]+{_MONTH}[\s,-]+(?P<y>\d{{4}})\b",
                        re.IGNORECASE)

# A version: dotted digits with two dots or more, or with one dot after a letter prefix (`go1.22`, `v16.3`).
_VERSION = re.compile(r"(?<![\d.])(?:(?P<prefix>[a-z]+[-_]?)|\b)(?P<v>\d+(?:\.\d+){1,3})(?![\d]|\.\d)", re.IGNORECASE)
_VERSION_WORD = re.compile(r"\b(?:version|release|v)\s*[:=]?\s*\"?$", re.IGNORECASE)

# A plain number: thousands separators (`,` or `_` or a thin space), decimals, an optional scale word or suffix.
_SCALES = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9}
_PLAIN = re.compile(r"(?<![\w.])(?P<n>-?\d{1,3}(?:[,_]\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)"
                    r"(?:(?P<glued>[kKmMbB]|bn|mn)\b|\s?(?P<word>thousand|million|billion)\b|(?P<pct>\s?%))?"
                    r"(?!\w|\.\d)")
# A clock duration: h:mm:ss or m:ss (with decimals).
_CLOCK = re.compile(r"(?<![\d:.])(?:(?P<h>\d{1,3}):)?(?P<m>\d{1,2}):(?P<s>\d{2}(?:\.\d+)?)(?![\d:])")


DATE_PATTERNS = (_ISO_DATE, _MONTH_FIRST, _DAY_FIRST)


@lru_cache(maxsize=16384)
def dates(text: str) -> frozenset[str]:
    """The ISO days a text names."""
    found = set()
    for pattern in (_ISO_DATE, _MONTH_FIRST, _DAY_FIRST):
        for match in pattern.finditer(text):
            groups = match.groupdict()
            month = int(groups["m"]) if groups.get("m") else MONTHS.get(groups["mon"].lower().rstrip("."))
            day, year = int(groups["d"]), int(groups["y"])
            if month and 1 <= month <= 12 and 1 <= day <= 31:
                found.add(f"{year:04d}-{month:02d}-{day:02d}")
    return frozenset(found)


def date_of(value: str) -> str | None:
    """The one day a value is, else None."""
    found = dates(value)
    return next(iter(found)) if len(found) == 1 else None


@lru_cache(maxsize=16384)
def versions(text: str) -> frozenset[str]:
    """The versions a text names, as dotted digits (`go1.22.7` and `v1.22.7` are 1.22.7)."""
    found = set()
    for match in _VERSION.finditer(text):
        version = match.group("v")
        if version.count(".") >= 2 or match.group("prefix") or _VERSION_WORD.search(text[:match.start()]):
            found.add(version)
    return frozenset(found)


def version_of(value: str) -> str | None:
    """The version a value is (`go1.22.7`, `v16.3`, `21.0.4+7-Ubuntu`, `1.22.7`), else None."""
    stripped = value.strip().strip("\"'`()")
    match = re.fullmatch(r"[a-z]*[-_]?(\d+(?:\.\d+){1,3})(?:[-+][\w.+-]*)?", stripped, re.IGNORECASE)
    if match is None:
        return None
    version = match.group(1)
    return version if version.count(".") >= 2 or not stripped[:1].isdigit() else None


# (value, half a unit of the writer's last digit, whether written as a percentage, significant digits)
Number = tuple[float, float, bool, int]
# A restatement rounds to at least this many significant digits (or keeps all of the original's): "0.91" states
# 0.9131, "0.9" does not.
MIN_SIGNIFICANT = 2


def _significant(digits: str) -> int:
    """Significant digits as written: leading zeros never count, an integer's trailing zeros do not either."""
    plain = digits.lstrip("-")
    if "." in plain:
        return max(1, len(plain.replace(".", "").lstrip("0")))
    return max(1, len(plain.lstrip("0").rstrip("0")))


def _parse(match: re.Match[str]) -> Number | None:
    digits = match.group("n").replace(",", "").replace("_", "")
    try:
        value = float(digits)
    except ValueError:
        return None
    decimals = len(digits.split(".", 1)[1]) if "." in digits else 0
    half = 0.5 * 10 ** -decimals
    scale = match.group("glued") or match.group("word")
    if scale:
        factor = _SCALES[scale.lower()]
        value, half = value * factor, half * factor
    return value, half, bool(match.group("pct")), _significant(digits)


@lru_cache(maxsize=16384)
def numbers(text: str) -> tuple[Number, ...]:
    """Every plain number of a text, with its rounding (a number glued to a unit other than a scale is left to
    `quantities.py`: "512M" here is 512 million, and it is compared only with a number without unit)."""
    found = []
    for match in _PLAIN.finditer(text):
        parsed = _parse(match)
        if parsed is not None:
            found.append(parsed)
    return tuple(found)


def number_of(value: str) -> Number | None:
    """The number a value is when it is one plain number (`0.9131`, `1,000`, `18.2M`, `92%`), else None."""
    match = _PLAIN.fullmatch(value.strip())
    return _parse(match) if match is not None else None


def numbers_agree(wanted: Number, said: Number) -> bool:
    """Whether a number said agrees with the one wanted: equal within the rounding of the less precise of the two,
    as written (a fraction and a percentage agree: 0.9131 is 91.31%)."""
    value, half, percent, digits = wanted
    other, other_half, other_percent, other_digits = said
    if other_digits < min(digits, MIN_SIGNIFICANT):
        return False
    if percent != other_percent:  # 0.9131 against 91.31%: compare as percentages
        value, half = (value * 100, half * 100) if not percent else (value, half)
        other, other_half = (other * 100, other_half * 100) if not other_percent else (other, other_half)
    slack = max(half, other_half)
    # A rounded restatement may be coarser than the original, never a different value at the original's precision.
    return abs(value - other) <= slack + 1e-9 * max(1.0, abs(value))


# A whole number grouped by dots, as German, Portuguese and others write thousands ("4.007", "1.048.576").
_DOT_GROUPED = re.compile(r"(?<![\w.,])\d{1,3}(?:\.\d{3})+(?![\w.,]*\d)")


@lru_cache(maxsize=16384)
def dot_grouped(text: str) -> frozenset[int]:
    """The whole numbers a text writes with dots between its thousands, read as such ("4.007" is also 4007: which
    one a writer meant is not known, so the caller accepts either reading as stating a whole number)."""
    return frozenset(int(m.group().replace(".", "")) for m in _DOT_GROUPED.finditer(text))


# A number with a decimal comma, as Portuguese, German, French and others write it ("1,60", "0,25"): digits on both
# sides, no space after the comma ("1, 60" is a list).
_COMMA_DECIMAL = re.compile(r"(?<![\w.,])-?\d+,\d+(?![\w.,]*\d)")


@lru_cache(maxsize=16384)
def comma_decimals(text: str) -> tuple[Number, ...]:
    """The numbers a text writes with a decimal comma, read as such ("1,60" is also 1.60 with its rounding: which one
    a writer meant by "1,600" is not known, so the caller accepts either reading, as with `dot_grouped`)."""
    found = []
    for match in _COMMA_DECIMAL.finditer(text):
        digits = match.group().replace(",", ".")
        decimals = len(digits.split(".", 1)[1])
        found.append((float(digits), 0.5 * 10 ** -decimals, False, _significant(digits)))
    return tuple(found)


@lru_cache(maxsize=16384)
def clock_seconds(text: str) -> tuple[tuple[float, float], ...]:
    """Durations written as a clock (`1:12:09` is 4329 s, `12:09` 729 s), with half a unit of the last digit."""
    found = []
    for match in _CLOCK.finditer(text):
        hours = int(match.group("h") or 0)
        seconds = match.group("s")
        decimals = len(seconds.split(".", 1)[1]) if "." in seconds else 0
        found.append((hours * 3600 + int(match.group("m")) * 60 + float(seconds), 0.5 * 10 ** -decimals))
    return tuple(found)


# A network address: a host (a name with a dot, an IPv4 address, a wildcard) and a port; a URL's host and port.
_URL = re.compile(r"^(?:[a-z][\w+.-]*://)?(?:[^@/\s]+@)?(?P<host>\[?[\w.*:-]*?\]?)(?::(?P<port>\d{1,5}))?(?P<path>/\S*)?$",
                  re.IGNORECASE)
WILDCARD_HOSTS = frozenset({"0.0.0.0", "*", "::", "[::]", ""})


def address_of(value: str) -> tuple[str, str | None, tuple[str, ...]] | None:
    """The host and port a value names when it is a URL (`postgresql://u@db-3.internal:5432/ledger`) or an address
    (`db-3.internal:5432`, `0.0.0.0:9020`), else None. A wildcard host (`0.0.0.0`, `*`, `[::]`) is "": the port is
    then the whole address ("listens on port 9020" states `0.0.0.0:9020`)."""
    value = value.strip().strip("\"'`")
    if "://" not in value and not re.fullmatch(r"[\w.*\[\]:-]+:\d{1,5}(?:/\S*)?", value):
        return None
    match = _URL.match(value)
    if match is None:
        return None
    host = match.group("host").lower()
    if "://" not in value and not ("." in host or host in WILDCARD_HOSTS):
        return None  # `file.py:12` is a place, `a:1` a pair
    # A path's parts with a digit identify (a database index, an id); its words may be said in other words.
    ids = tuple(p for p in (match.group("path") or "").split("/") if any(ch.isdigit() for ch in p))
    return ("" if host in WILDCARD_HOSTS else host), match.group("port"), ids


def states_address(text: str, host: str, port: str | None, ids: tuple[str, ...] = ()) -> bool:
    """Whether a normalised text names an address: its host (a whole name), its port next to it or as "port N", and
    the parts of its path with a digit."""
    if host and re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w-]|\.\w)", text) is None:
        return False
    # A sentence's full stop after the path is no part of it ("... is redis://cache-10:6379/1.").
    if any(re.search(rf"(?<![\w.]){re.escape(part.lower())}(?!\w|\.\w)", text) is None for part in ids):
        return False
    if port is None:
        return True
    near = rf"{re.escape(host)}:{port}\b" if host else rf"(?<![\w.])(?:[\w.*\[\]:-]+:|port\s*)?{port}\b"
    return re.search(near, text) is not None or re.search(rf"\bport\s*:?\s*{port}\b", text) is not None


# What a short output states without naming it: a URL, an address, a date, a number with a unit, a version, an id
# with letters and digits, a number of three digits or more.
TYPED = re.compile(
    r"(?P<url>[a-z][\w+.-]*://\S+)|"
    r"(?P<address>(?<![\w.])(?:\d{1,3}(?:\.\d{1,3}){3}|\*|\[::\]|[a-z][\w-]*(?:\.[\w-]+)+):\d{1,5}(?![\w.]))|"
    rf"(?P<date>{_MONTH_FIRST.pattern}|(?<![\d.])\d{{4}}-\d{{2}}-\d{{2}}(?:[t ][\d:.]+z?)?)|"
    r"(?P<quantity>(?<![\w.])\d+(?:\.\d+)?\s?(?:[kmgt]i?b|[kmgt]i?|ms|s|min|h|%)(?![\w.]))|"
    r"(?P<version>(?<![\w.])v?\d+\.\d+\.\d+[\w.+-]*)|"
    r"(?P<id>(?<![\w./-])(?=[\w.-]*\d)(?=[\w.-]*[a-z])[a-z][\w.-]*[a-z0-9](?![\w/])(?!\"?\s*[:=]))|"
    r"(?P<number>(?<![\w.,:/-])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.,])|(?<![\w.,:/-])\d{3,}(?:\.\d+)?(?![\w.,:])|"
    r"(?<![\w.,:/-])\d+\.\d+(?![\w.,:]))",
    re.IGNORECASE)


# Between the values of one fact that states several (a line's schedule or range): each must be stated.
VALUE_GROUP_SEPARATOR = " ; "


def typed_values(line: str) -> list[tuple[int, str]]:
    """The values a line states by what they are, with where each starts."""
    return [(m.start(), m.group().rstrip(".,;)")) for m in TYPED.finditer(line)]
