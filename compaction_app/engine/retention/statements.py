"""Settings a history states, and which value of each is the latest (a later line supersedes an earlier one).

A *statement* is a named value: a config line in a tool's output (`listen_port = 19000`, `worker_timeout: 50`,
`14:RATE_LIMIT_PER_MIN=300`, `peak memory: 1843 MiB`, `Version: 7.1.3`, `notAfter=Mar 14 09:30:00 2027 GMT`), a
leaf of a JSON output (`{"port": 24011}`), a cell of a short table (a header in capitals, or plain words as `df`
prints them, or drawn with bars as psql does; each cell also knows its row's values), the `key=value` pairs of a
log line (`rows=18,204,551 elapsed=1h12m09s`), the fields of a list of
measurements (`epoch 10/10 - loss 0.2094 - val_auc 0.9131`), a config directive (`client_max_body_size 25m;`), a
tool's version (`go version go1.22.7`, or the first line a version command prints), or a later sentence that names a setting already seen and gives it a value ("RATE_LIMIT_PER_MIN
is now 620", "raised worker_timeout from 50 to 100"). Values hold a digit (ports, ids, versions, sizes, timeouts):
what the agent may need again and a summary may get wrong. Summaries are not read for statements: a summary
restating a stale value is not a correction.

`latest_values` folds a history's statements in order, so the value a fact asks for is the last one stated.

Plain Python; the same history always gives the same statements.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from compaction_app.engine.retention.quantities import quantity_of
from compaction_app.engine.retention.tallies import TALLY_SUFFIX, tally_text
from compaction_app.engine.retention.values import date_of

# A config or report line: an optional grep line-number prefix, a name of up to four words, `=` or `:`, a value.
KV_LINE = re.compile(
    r"""^\s*(?:\d+[:-])?\s*["']?(?P<key>[A-Za-z_][\w.\-]*(?: [A-Za-z_][\w.\-]*){0,3})["']?\s*(?:=|:)\s*"""
    r"""["']?(?P<value>[^"'\s][^"']*?)["']?\s*[,;]?\s*$""")
# A report line with no `=` or `:`, a name and a measurement a tab or two spaces apart (bash's `time`: `real
# 2m14.310s`; `Peak RSS   512 MiB`): a statement only when the value is a number with a unit.
MEASURE_LINE = re.compile(r"^\s*(?P<key>[A-Za-z_][\w.\-]*(?: [A-Za-z_][\w.\-]*){0,2})(?:\t+|\s{2,})(?P<value>\S.*?)\s*$")
# A value a later sentence gives a setting: a number (with its unit) or a version.
VALUE_WORD = re.compile(r"(?<![\w./@-])-?\d[\d.,]*(?:\s?[A-Za-zµ]{1,12}\b)?(?![\w/-])")
# Words that introduce the new value in a sentence ("from 50 to 100", "is now 620", "50 -> 100").
NEW_VALUE = re.compile(r"\b(?:to|now|becomes?|became|into)\b|->|→|=>")
CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\n")
USE_VALUE_FOR = re.compile(r"(?<![\w./-])(-?\d[\d.,]*(?:\s?[A-Za-zµ]{1,12})?)\s+(?:for|as)\s+(?:the\s+)?$")
MAX_VALUE_WORDS = 2
MAX_STATEMENTS_PER_TEXT = 8


@dataclass(frozen=True)
class Statement:
    key: str  # as written
    value: str
    source: str = ""  # where it was stated (a file, a command); "" for a sentence restating a known setting
    about: frozenset[str] = frozenset()  # a restatement's identifiers (which source it corrects)
    # A table cell's row: the values of the row's other cells and what names the row (its first cells when the
    # table has several rows). A summary that states most of a row keeps each of its cells (`match.states_row`).
    row: tuple[str, ...] = ()
    row_name: str = ""

    @property
    def name(self) -> str:
        """The setting's identity: lower case, separators unified (`RATE_LIMIT_PER_MIN`, `rate-limit-per-min`)."""
        return normalise_key(self.key)


@lru_cache(maxsize=65536)
def normalise_key(key: str) -> str:
    """`HostPort` and `host-port` and `host port` are `host_port`."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key.strip())
    return re.sub(r"[\s\-]+", "_", snake.lower())


def identifiers(text: str) -> set[str]:
    """The names with a digit in a text (`pg-11`, `web-3`, `checkout-41`): what tells one source from another."""
    return set(re.findall(r"[a-z][a-z_-]*\d[\w-]*", text.lower()))


def _plain_value(value: str) -> str | None:
    value = re.sub(r"\s*\([^)]*\)\s*$", "", value.strip())  # a trailing note: "4 (12s ago)" states 4
    if not value or not any(ch.isdigit() for ch in value) or value.startswith("//"):
        return None
    if len(value.split()) > MAX_VALUE_WORDS and quantity_of(value) is None and date_of(value) is None:
        return None
    return value


# Leaf names that say nothing of what they hold: the leaf is named by its parent (terraform's
# `{"db_endpoint": {"value": ...}}` states db_endpoint).
GENERIC_KEYS = frozenset({"value", "val", "current", "default", "data", "result", "v"})


def _json_leaves(data: Any, key: str = "") -> list[Statement]:
    found: list[Statement] = []
    if isinstance(data, dict):
        for name, value in data.items():
            found += _json_leaves(value, key if str(name).lower() in GENERIC_KEYS and key else str(name))
    elif isinstance(data, list):
        for value in data:
            found += _json_leaves(value, key)
    elif key and not isinstance(data, bool) and data is not None:
        value = _plain_value(str(data))
        if value is not None and re.match(r"^[A-Za-z_]", key):
            found.append(Statement(key, value))
    return found


# A table's header row (`NAME  READY  STATUS  RESTARTS  AGE`, `NAME  CPU(cores)  MEMORY(bytes)`): names in capitals,
# each with an optional unit in parentheses, two or more spaces or a tab apart.
TABLE_HEADER = re.compile(r"^[A-Z][A-Z_-]*(?:\([a-z%]+\))?(?:(?:\s*\t\s*|\s{2,})[A-Z][A-Z_ -]*(?:\([a-z%]+\))?)+$")
# Cells are two spaces or a tab apart (`helm list` pads with spaces and separates with tabs).
TABLE_CELLS = re.compile(r"\s*\t\s*|\s{2,}")
# A table drawn with bars (psql: ` status | count`, then `--------+-------`, then ` failed |  4093`).
BAR_RULE = re.compile(r"^[-+|=\s]{3,}$")
# A table longer than this is a listing, not a few measurements.
MAX_TABLE_ROWS = 4


def _table(lines: list[str]) -> list[Statement]:
    """The cells of a short table with a header row (`kubectl top pod`): each cell holding a digit is a statement
    named by its column (its unit in parentheses left out), and by its row's first cell when there are several
    rows."""
    header = next((i for i, line in enumerate(lines[:3]) if TABLE_HEADER.match(line)), None)
    if header is None:
        return []
    names = [re.sub(r"\(.*\)$", "", cell) for cell in TABLE_CELLS.split(lines[header].strip())]
    rows = [TABLE_CELLS.split(line.strip()) for line in lines[header + 1:]]
    if not rows or len(rows) > MAX_TABLE_ROWS:
        return []
    return _cells(names, rows, first=1)


def _bar_table(lines: list[str]) -> list[Statement]:
    """A table drawn with bars (psql's ` status | count` over `--------+------`): its cells, as `_table`'s."""
    if len(lines) < 3 or "|" not in lines[0] or not BAR_RULE.match(lines[1]):
        return []
    names = [cell.strip() for cell in lines[0].strip().strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[2:]
            if "|" in line and not BAR_RULE.match(line)]
    if not rows or len(rows) > MAX_TABLE_ROWS or not all(names):
        return []
    return _cells(names, rows, first=1)


def _row_names(rows: list[list[str]]) -> list[str]:
    """What tells each row from the others: its first cell, or its first two when the first repeats (`docker
    images` lists one repository under several tags)."""
    firsts = [cells[0] for cells in rows]
    return [cells[0] if firsts.count(cells[0]) == 1 or len(cells) < 2 else f"{cells[0]} {cells[1]}"
            for cells in rows]


def row_values(cells: list[str], name: str) -> tuple[str, ...]:
    """The values a row states, each its own: every cell holding a digit but those that only repeat the row's
    name (`Deployment/web-3` in web-3's row), a cell of two values split (`73%/80%`, `1.2MB / 800kB`)."""
    found: list[str] = []
    own = {part for part in re.split(r"[\s/]+", name.lower()) if part}
    for cell in cells:
        for part in re.split(r"\s*/\s*(?=[\d.]+\s*[%A-Za-z]*$)|(?<=%)/", cell):
            part = re.sub(r"^[A-Za-z ]+:\s*", "", part.strip())  # `cpu: 73%` is 73%
            value = _plain_value(part)
            if value is not None and value not in found and \
                    not {p for p in re.split(r"[\s/]+", value.lower()) if re.search(r"\d", p)} <= own:
                found.append(value)
    return tuple(found)


def _cells(names: list[str], rows: list[list[str]], *, first: int) -> list[Statement]:
    """Each cell holding a digit, named by its column (and by its row's name when there are several rows), with
    its row's values."""
    found = []
    # A column with the same cell in every row (READY 1/1, AGE 2d3h of two pods) tells no row from another: it
    # describes the table, and a summary keeping what differs keeps the rows.
    uniform = {j for j in range(first, len(names)) if len(rows) > 1 and len({
        tuple(cells[j:j + 1]) for cells in rows if len(cells) == len(names)}) == 1}
    for cells, row_name in zip(rows, _row_names(rows), strict=True):
        if len(cells) != len(names):
            continue
        values = tuple(dict.fromkeys(v for j, cell in enumerate(cells) if j not in uniform
                                     for v in row_values([cell], row_name)))
        for j, (name, cell) in enumerate(zip(names[first:], cells[first:], strict=True), start=first):
            value = _plain_value(cell)
            if value is not None and re.match(r"^[A-Za-z_]", name) and j not in uniform:
                found.append(Statement(name if len(rows) == 1 else f"{row_name} {name}", value, row=values,
                                       row_name=row_name))
    return found[:MAX_STATEMENTS_PER_TEXT]


def _loose_table(lines: list[str]) -> list[Statement]:
    """A short table whose header is plain words a space apart in any case (`df -h`: `Filesystem  Size  Used Avail
    Use% Mounted on`): rows split on whitespace, the header's extra words joined into its last column."""
    if len(lines) < 2 or len(lines) > MAX_TABLE_ROWS + 1:
        return []
    names = lines[0].split()
    rows = [line.split() for line in lines[1:]]
    width = len(rows[0])
    if width < 3 or any(len(cells) != width for cells in rows) or len(names) < width or \
            any(not LOOSE_HEADER_CELL.fullmatch(name) for name in names):
        return []
    names = [*names[:width - 1], " ".join(names[width - 1:])]
    return _cells(names, rows, first=1)


# A header cell: a word, maybe with a unit or a percent sign (`Use%`, `CPU(cores)`), no digit.
LOOSE_HEADER_CELL = re.compile(r"[A-Za-z][A-Za-z_.-]*%?(?:\([A-Za-z%]+\))?")
# `key=value` pairs of a log line (logfmt: `level=error order=ord_1 elapsed=1h12m09s`), a value quoted or bare.
PAIR = re.compile(r"""(?<![\w.-])(?P<key>[A-Za-z_][\w.-]*)=(?P<value>"[^"]*"|'[^']*'|(?:[^\s,;]|,(?=\d))+)""")
# The fields of a line of measurements: `epoch 9/10 - loss 0.2107 - val_auc 0.9105`, `a: 1 | b: 2`, `a 1, b 2`.
FIELD_SEPARATOR = re.compile(r"\s+[-|•·]\s+|\s*\|\s*|[,;]\s+|\t+|\s{2,}")
FIELD = re.compile(r"^(?P<key>[A-Za-z_][\w.%/-]*(?: [A-Za-z_][\w.%-]*){0,2})\s*[=:]?\s+(?P<value>\S+)$")
# A directive of a config file: a name with `_` or `.` in it, a space and a value (nginx's `client_max_body_size
# 25m;`, sysctl's `vm.swappiness 10`), after an optional grep line number.
DIRECTIVE = re.compile(r"^\s*(?:\d+[:-])?\s*(?P<key>[A-Za-z][\w-]*[_.][\w.-]*)\s+(?P<value>[^\s;]+)\s*;?\s*$")
# A tool saying its own version: `openjdk version "21.0.4" 2024-07-16`, `go version go1.22.7 linux/amd64`.
VERSION_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][\w.+-]*(?: [A-Za-z][\w.+-]*)?) version\b[\s:]*\"?(?P<value>\S+?)\"?(?:\s|$)")


def _line_fields(line: str) -> list[Statement]:
    """The named values of one line that is not a `name = value` line: its `key=value` pairs (two or more), its
    fields when it is a list of two or more `name value` measurements, a config directive, a tool's version."""
    pairs = [(m.group("key"), m.group("value").strip("\"'")) for m in PAIR.finditer(line)]
    if len(pairs) < 2:
        fields = [FIELD.match(part.strip()) for part in FIELD_SEPARATOR.split(line.strip())]
        pairs = [(m.group("key"), m.group("value")) for m in fields
                 if m is not None and _plain_value(m.group("value")) is not None]
        if len(pairs) < 2:  # one `name value` in a line is prose, not a list of measurements
            pairs = []
            for pattern in (DIRECTIVE, VERSION_LINE):
                match = pattern.match(line)
                if match is not None:
                    key = match.group("key")
                    pairs = [(f"{key} version" if pattern is VERSION_LINE else key, match.group("value"))]
                    break
    found = []
    for key, raw in pairs:
        value = _plain_value(raw.rstrip(",;"))
        if value is not None:
            found.append(Statement(key, value))
    return found


def is_table(lines: list[str]) -> bool:
    """Whether the table readers read these lines (a header and rows: every cell is theirs)."""
    return bool(_any_table(lines))


# A rule drawn with dashes or equals signs under a header or above a total (`coverage report`, `pip list`): it draws
# the table and is no row of it. psql's rule (`----+----`) is its bar table's.
DASH_RULE = re.compile(r"[-=]{3,}(?:\s+[-=]{3,})*")


def _any_table(lines: list[str]) -> list[Statement]:
    """The cells of whichever table reader reads the lines, its dashed rules left out."""
    found = _table(lines) or _bar_table(lines) or _loose_table(lines) or _csv_table(lines)
    if found:
        return found
    unruled = [line for line in lines if not DASH_RULE.fullmatch(line.strip())]
    return (_table(unruled) or _loose_table(unruled)) if len(unruled) < len(lines) else []


_CSV_LINE = re.compile(r"[^\s,]+(?:,\s?[^\s,]+)+")


def _csv_table(lines: list[str]) -> list[Statement]:
    """Comma-separated rows (`tail -n 2 report.csv`: `2026-12-01,388,9130.25`), under their header when the first
    line has no digit, else under their column numbers: each cell a statement of its row, as `_table`'s."""
    # A cell holds no space (a log line's `rows=1,234,567 elapsed=...` is no row of cells).
    if not all(_CSV_LINE.fullmatch(line.strip()) for line in lines if line.strip()):
        return []
    rows = [[cell.strip() for cell in line.split(",")] for line in lines if line.strip()]
    if not rows or len(rows[0]) < 3 or any(len(cells) != len(rows[0]) for cells in rows) or \
            any(not all(cells) for cells in rows):
        return []
    names = rows[0] if not any(ch.isdigit() for ch in lines[0]) else [f"column {i}" for i in range(1, len(rows[0]) + 1)]
    rows = rows[1:] if names is rows[0] else rows
    if not rows or len(rows) > MAX_TABLE_ROWS:
        return []
    return _cells(names, rows, first=1)


def structured(lines: list[str]) -> list[Statement]:
    """The statements of a tool output's body lines: a JSON document's leaves, a short table's cells, or its named
    values line by line (`name = value` and `name: value` lines, `key=value` pairs, lists of measurements, config
    directives, a tool's version)."""
    return [with_key_unit(s) for s in _structured(lines)]


# A measurement's spread (`331.4 ms ±  9.3 ms`, `12.1 +/- 0.4`): part of the measurement, not a second value of its
# name.
SPREAD = re.compile(r"\s*(?:±|\+/-)\s*\d[\d.]*\s*(?:[a-zµ]{1,3}\b|%)?", re.IGNORECASE)


def _structured(lines: list[str]) -> list[Statement]:
    text = "\n".join(lines).strip()
    if text[:1] in "{[":
        try:
            return _json_leaves(json.loads(text))[:MAX_STATEMENTS_PER_TEXT]
        except ValueError:
            pass
        try:  # a printed Python dict or list (`{'LOCATION': 'redis://cache-10:6379/1', 'TIMEOUT': 300}`)
            return _json_leaves(ast.literal_eval(text))[:MAX_STATEMENTS_PER_TEXT]
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    table = _any_table(lines)
    if table:
        return table
    found = []
    for line in lines:
        counts = tally_text(line)
        if counts is not None:  # a line of counts is one fact, named by the words before it (`tallies.py`)
            label = " ".join(line[:line.index(counts)].replace(":", " ").split()[-2:])
            found.append(Statement(f"{label} {TALLY_SUFFIX}".strip(), counts))
            continue
        measured = measured_line(line) or rate_line(line)
        if measured is not None:
            found.append(measured)
            continue
        paired = slash_pairs(line)
        if paired:
            found += paired
            continue
        match = KV_LINE.match(line)
        if match is None:
            match = MEASURE_LINE.match(line)
            if match is None or quantity_of(match.group("value")) is None:
                found += _line_fields(line)
                continue
        value = _plain_value(match.group("value"))
        if value is not None:
            found.append(Statement(match.group("key"), value))
    return _capped(found)


# A measurement first, then what it measured (pytest's `5.03s call  tests/a.py::test_b`, `du`'s `1.2G  logs/x`): a
# number with a unit, maybe one word saying which phase, a name with no space.
LEADING_MEASURE = re.compile(r"^\s*(?P<value>\d[\d.,]*\s?[A-Za-zµ]+)\s+(?:(?P<phase>[a-z]+)\s+)?(?P<name>\S*[A-Za-z]\S*)\s*$")


def measured_line(line: str) -> Statement | None:
    """A line that is a measurement and the thing it measured, as that thing's statement: named by the thing's last
    part (a test's name after `::`, a path's file or folder) and the phase word (`call`, `setup`), so a test's setup
    time is not its call time."""
    match = LEADING_MEASURE.match(line)
    if match is None or quantity_of(match.group("value")) is None:
        return None
    thing = re.split(r"::|/", match.group("name").rstrip("/"))[-1]
    if not thing:
        return None
    return Statement(" ".join(filter(None, (thing, match.group("phase")))), match.group("value"))


# A rate named with its time unit after a slash (wrk's `Requests/sec:   1270.27`, `Transfer/sec`, `ops/s`): the
# value is that many per that unit, so a summary's "76,216 requests/min" or "1270 req/s" states it.
RATE_LINE = re.compile(r"^\s*(?P<key>[A-Za-z][\w.-]*(?: [A-Za-z][\w.-]*){0,2})/(?P<per>s|sec|second|min|minute|h|"
                       r"hr|hour)\b\s*[:=]?\s+(?P<value>\d[\d.,]*)\s*$", re.IGNORECASE)


def rate_line(line: str) -> Statement | None:
    """A `name/unit: number` line as a rate statement (`Requests/sec: 1270.27` is 1270.27 per second)."""
    match = RATE_LINE.match(line)
    if match is None:
        return None
    per = match.group("per").lower()
    return Statement(f"{match.group('key')}/{per}", f"{match.group('value')}/{per}")


# Names and values listed in the same order, each list joined by slashes (ping's `rtt min/avg/max/mdev =
# 8.1/14.2/31.4/3.2 ms`, `p50/p95/p99: 12/48/97 ms`): each name states the value at its place, with the unit after.
SLASH_PAIRS = re.compile(r"^\s*(?:[A-Za-z][\w-]*\s+)?(?P<names>[A-Za-z]\w*(?:/[A-Za-z]\w*)+)\s*[=:]\s*"
                         r"(?P<values>-?\d[\d.]*(?:/-?\d[\d.]*)+)\s*(?P<unit>[A-Za-zµ%]{1,4})?\s*$")


def slash_pairs(line: str) -> list[Statement]:
    """A line of slash-separated names and as many slash-separated values as one statement per name."""
    match = SLASH_PAIRS.match(line)
    if match is None:
        return []
    names, values = match.group("names").split("/"), match.group("values").split("/")
    if len(names) != len(values):
        return []
    unit = f" {match.group('unit')}" if match.group("unit") else ""
    return [Statement(name, f"{value}{unit}") for name, value in zip(names, values, strict=True)]


def named_values(lines: list[str]) -> set[str]:
    """Every value the lines give a name to, a superseded one included (a log's earlier epochs)."""
    found = set()
    for line in lines:
        match = KV_LINE.match(line) or MEASURE_LINE.match(line)
        # Only a value a statement can hold: one the rules read and dropped (vegeta's `[min, mean, ...]  3.1ms,
        # ...`, no single value) is left to the short output's catch-all.
        if match is not None and _plain_value(match.group("value").strip()) is not None:
            found.add(match.group("value").strip())
        found |= {s.value for s in _line_fields(line)}
    return found


def _capped(found: list[Statement]) -> list[Statement]:
    """At most MAX_STATEMENTS_PER_TEXT statements, in order, each setting at the last value the text gives it (a
    log printing a metric every epoch states its last value, however many lines came before)."""
    last = {s.name: index for index, s in enumerate(found)}
    return [s for index, s in enumerate(found) if last[s.name] == index][-MAX_STATEMENTS_PER_TEXT:]


# A name that says its value's unit (`oldest_age_seconds`, `timeout_ms`, `size_bytes`, `heap_mb`).
KEY_UNIT = re.compile(r"(?:^|[_.-])(seconds|secs|sec|ms|millis|minutes|mins|hours|bytes|kb|mb|gb|kib|mib|gib|pct|"
                      r"percent)$", re.IGNORECASE)
_KEY_UNITS = {"millis": "ms", "secs": "s", "sec": "s", "mins": "min", "pct": "%"}


def with_key_unit(statement: Statement) -> Statement:
    """A plain number under a name that says its unit, with that unit (`oldest_age_seconds: 1800` is 1800 s)."""
    unit = KEY_UNIT.search(statement.key)
    if unit is None or not re.fullmatch(r"-?\d+(?:\.\d+)?", statement.value):
        return statement
    word = unit.group(1).lower()
    return replace(statement, value=f"{statement.value} {_KEY_UNITS.get(word, word)}")


# A command that asks a program for its version (`psql --version`, `java -version`, `go version`, `node -v`).
VERSION_COMMAND = re.compile(r"^(?P<program>[\w.+-]+)(?: (?:--version|-version|-V|-v|version))(?:\s|$)")


def version_statement(command: str, lines: list[str]) -> Statement | None:
    """The version a version command printed (`psql (PostgreSQL) 16.3` for `psql --version`): the first dotted
    number of its output's first line, named after the program."""
    match = VERSION_COMMAND.match(command)
    if match is None or not lines:
        return None
    found = re.search(r"(?<![\w.])[a-z]*v?(\d+(?:\.\d+)+)", lines[0], re.IGNORECASE)
    if found is None:
        return None
    return Statement(f"{match.group('program').rsplit('/', 1)[-1]} version", found.group(0))


def restated(text: str, names: set[str]) -> list[Statement]:
    """Statements of settings already known (`names`) in free text, in order: the value after the setting's name in
    the same clause, the one after "to"/"now"/"->" when there is one ("from 50 to 100" states 100)."""
    if not names:
        return []
    found: list[tuple[int, Statement]] = []
    mentions = list(_mentions(text, names))
    for index, (start, end) in enumerate(mentions):
        # "use 9010 for APP_PORT": the value before the name.
        before = USE_VALUE_FOR.search(text[max(0, start - 40):start])
        if before is not None:
            value = _plain_value(_unit_or_number(before.group(1)))
            if value is not None:
                said = Statement(text[start:end], value, about=frozenset(identifiers(text)))
                found.append((start, with_key_unit(said)))  # "INDEX_REFRESH_MS=2500" is 2500 ms
                continue
        # A clause ends at the next setting it names: "RATE to 600 and QUEUE to 250" gives RATE 600, not 250.
        rest = text[end: mentions[index + 1][0] if index + 1 < len(mentions) else len(text)]
        stop = CLAUSE_END.search(rest)
        clause = rest[: stop.start() if stop else len(rest)]
        values = list(VALUE_WORD.finditer(clause))
        if not values:
            continue
        pivots = [m.end() for m in NEW_VALUE.finditer(clause)]
        after = [v for v in values if pivots and v.start() >= pivots[-1]]
        chosen = after[0] if after else values[0]
        value = _plain_value(_unit_or_number(chosen.group()))
        if value is not None:
            said = Statement(text[start:end], value, about=frozenset(identifiers(text)))
            found.append((start, with_key_unit(said)))
    return [s for _, s in sorted(found, key=lambda pair: pair[0])]


_NAME_WORD = re.compile(r"[A-Za-z0-9_][\w.\-]*")
MAX_NAME_WORDS = 4


def _mentions(text: str, names: set[str]) -> Iterator[tuple[int, int]]:
    """Where a text names a known setting: runs of one to four words (space-separated) whose normalised form is a
    name (`RATE_LIMIT_PER_MIN`, `rate-limit-per-min`, `peak memory`). Linear in the text, whatever the names."""
    words = [(m.start(), m.start() + len(m.group().rstrip(".,:;-")), m.group().rstrip(".,:;-"))
             for m in _NAME_WORD.finditer(text)]
    for i in range(len(words)):
        for span in range(1, MAX_NAME_WORDS + 1):
            if i + span > len(words):
                break
            run = words[i:i + span]
            if span > 1 and text[run[-2][1]:run[-1][0]] != " ":
                break
            if normalise_key(" ".join(w for _, _, w in run)) in names:
                yield run[0][0], run[-1][1]
                break


def _unit_or_number(word: str) -> str:
    """A value word with its unit only when the unit is one ("1843 MiB"; "620 per" is 620)."""
    word = word.strip().rstrip(".,")
    if quantity_of(word) is not None:
        return word
    return re.match(r"-?\d[\d.,]*", word).group().rstrip(".,")  # type: ignore[union-attr]


def corrected_sources(statement: Statement, by_name: dict[str, list[str]]) -> list[str]:
    """Which sources a restatement corrects (`by_name`: each setting's sources, the last stated last): those of its
    setting it names an identifier of ("ALTER SYSTEM SET max_connections = 200" on `pg-11` corrects pg-11's
    postgresql.conf); none when it names only a sibling of theirs (`pg-12`: another server, whose own output comes
    later); else the one stated last."""
    sources = by_name.get(statement.name, [])
    named = [source for source in sources if identifiers(source) & statement.about]
    if named:
        return named
    known = {_shape(i) for source in sources for i in identifiers(source)}
    if any(_shape(i) in known for i in statement.about):
        return []
    return sources[-1:]


def _shape(identifier: str) -> str:
    return re.sub(r"\d+", "#", identifier)


def latest_values(statements: list[Statement]) -> dict[tuple[str, str], Statement]:
    """The last statement of each setting (source, name), in the order given (the history's order). A restatement
    without a source updates the setting of that name it corrects (`corrected_sources`)."""
    latest: dict[tuple[str, str], Statement] = {}
    by_name: dict[str, list[str]] = {}
    for statement in statements:
        if statement.source:
            latest.pop((statement.source, statement.name), None)  # re-inserted last: the newest source
            latest[(statement.source, statement.name)] = statement
            sources = by_name.setdefault(statement.name, [])
            if statement.source in sources:  # moved last: the newest source
                sources.remove(statement.source)
            sources.append(statement.source)
            continue
        for source in corrected_sources(statement, by_name):
            latest[(source, statement.name)] = Statement(latest[(source, statement.name)].key, statement.value, source)
    return latest
