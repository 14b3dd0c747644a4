"""How a fact is recognised in a text: normalised tokens, with identifiers and numbers as anchors.

A fact survives a compaction when one segment of the new window (a message line, a tool call with its output)
states it. Neither a paraphrase nor a clipped line should decide that by accident, so a fact is compared by:

- its **anchors**: identifiers and numbers (paths, snake_case and dotted names, CamelCase words, ids, ports, amounts)
  taken from its whole text, not its opening characters. Every anchor must occur in the segment as a whole token: a
  summary that clipped an error line before the detail at character 200 loses the detail's anchors, and the fact;
- its **content words** (lower case, stop words removed, a light suffix stemming): at least `WORD_COVER` of them must
  occur, so a faithful paraphrase that keeps the identifiers and most of the meaning counts and a different sentence
  that shares one path does not;
- a command's **exit status**, stated as a number next to exit/code/status words, or as pass/fail words.

Plain Python; the same texts always give the same verdict.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

from compaction_app.engine.retention.quantities import (
    quantity_of,
    rate_spans,
    rates,
    states_byte_count,
    states_quantity,
)
from compaction_app.engine.retention.values import (
    DATE_PATTERNS,
    VALUE_GROUP_SEPARATOR,
    address_of,
    comma_decimals,
    date_of,
    dates,
    dot_grouped,
    number_of,
    numbers,
    numbers_agree,
    states_address,
    version_of,
    versions,
)

# Share of a fact's content words a segment must hold (with every anchor) to state the fact.
WORD_COVER = 0.5
# A fact with no anchor at all is matched on its words alone, so it needs more of them.
NO_ANCHOR_WORD_COVER = 0.7
# With anchors, a long text needs at most this many of its words (its anchors carry the rest): a paraphrase of a
# 40-word error line keeps the account and offset, not the filler.
VALUED_MAX_WORDS = 2
ANCHORED_MAX_WORDS = 3
# A fact with this many anchors or more is matched on its anchors and a lower share of words.
MANY_ANCHORS = 3
MANY_ANCHORS_WORD_COVER = 0.33
# A segment holding every one of this many anchors of a fact states it in any words ("needs boto3 >=3.7,<5.0; 5.3
# is installed" for "requires boto3<5.0,>=3.7, but you have boto3 5.3").
ALL_ANCHORS_SUFFICE = 4

STOP_WORDS = frozenset("""
a an and are as at be been but by can could did do does for from had has have he her his i if in into is it its
me my of on or our out over so than that the their them then there these they this to too up us was we were what
when where which while who will with would you your yet also just now let lets use used using via per about after
before again all any each more most other some such own same both here how why should shall may might
""".split())
# Words that carry a constraint's meaning and must not be dropped as stop words.
KEEP_WORDS = frozenset({"not", "no", "never", "always", "only", "must", "without", "dont", "don't"})

_TOKEN = re.compile(r"[a-z0-9_$@#%~+\-]+(?:[./:\\][a-z0-9_$@#%~+\-]+)*")
_TOKEN_ANY_CASE = re.compile(_TOKEN.pattern, re.IGNORECASE)
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")
_NUMBER = re.compile(r"^-?\d+(?:[.,:]\d+)*$")
_DIGIT_GROUPS = re.compile(r"^\d+(?:-\d+)+$")
_THOUSANDS = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d,])")
# A place in a file (`src/a.py:212`): a segment names it with the path and the number apart too ("line 212 of
# src/a.py").
_FILE_LINE = re.compile(r"^(.+\.[a-z0-9]{1,6}):(\d+)$")
# A hex digest of 8 or more characters: git accepts any prefix of 7 or more for it, and so does a reader.
_DIGEST = re.compile(r"^[0-9a-f]{8,64}$")
_SHORT_DIGEST = re.compile(r"^[0-9a-f]{7,64}$")
_SUFFIXES = ("ations", "ation", "ures", "ure", "ings", "ing", "ies", "ied", "ers", "er", "ed", "ly", "s")
_UNDOUBLE = ("ing", "ed", "er", "ers", "ings")


def _unquote(text: str) -> str:
    return text.replace("`", " ").replace("*", " ").replace('"', " ").replace("'", " ")


def normalise(text: str) -> str:
    """Lower case, markdown quoting removed, whitespace collapsed: the form facts are compared in."""
    return " ".join(_unquote(text).lower().split())


def tokens(text: str) -> list[str]:
    """The tokens of a normalised text (paths and dotted names stay one token; trailing dots and colons go)."""
    return [t.strip("-.:") for t in _TOKEN.findall(text) if t.strip("-.:")]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stemmer: fail, fails, failed, failing, failure all give `fail`; running gives `run`;
    file and files give `fil`, reconcile and reconciling `reconcil`."""
    if word in KEEP_WORDS:
        return word
    base = word
    if len(word) > 4:
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                base = word[: -len(suffix)]
                if suffix in _UNDOUBLE and len(base) > 2 and base[-1] == base[-2] and base[-1] not in "slz":
                    base = base[:-1]
                break
    if base.endswith("e") and len(base) > 3:
        base = base[:-1]
    return base


def is_anchor(original: str) -> bool:
    """An identifier or a number (in its original case): what a faithful paraphrase keeps verbatim."""
    token = original.lower()
    if _NUMBER.match(token):
        return len(token.strip("-").replace(".", "").replace(",", "").replace(":", "")) >= 2
    if _DIGIT_GROUPS.match(token):  # a date, a range of numbers: 2026-11-26, 8000-8100
        return True
    if any(ch.isdigit() for ch in token) and any(ch.isalpha() for ch in token):
        return True
    if any(sep in token for sep in ("_", "/", "\\")) or "." in token:
        return True
    return bool(_CAMEL.search(original))


def anchors_of(text: str) -> tuple[str, ...]:
    """The identifiers and numbers of a text, in order, without repeats (compared in lower case)."""
    found: list[str] = []
    for match in _TOKEN_ANY_CASE.finditer(_unquote(text)):
        flag = match.group().startswith("--") and len(match.group()) > 4  # a long option names what a command did
        original = match.group().strip("-.:")
        token = original.lower()
        if original and (flag or is_anchor(original)) and token not in found:
            found.append(token)
    return tuple(found)


def words_of(text: str) -> tuple[str, ...]:
    """The stemmed content words of a text (anchors and stop words excluded), without repeats."""
    found: list[str] = []
    for token in tokens(normalise(text)):
        if not token.isalpha() and token.replace("'", "") not in KEEP_WORDS:
            continue
        if token in STOP_WORDS and token not in KEEP_WORDS:
            continue
        stemmed = stem(token)
        if len(stemmed) >= 2 and stemmed not in found:
            found.append(stemmed)
    return tuple(found)


# An HTTP status code says its reason phrase: a claim "GET /x -> 404" states a failure line "Not Found: /x".
HTTP_REASONS = {code: frozenset(stem(w) for w in reason.split()) for code, reason in {
    "400": "bad request", "401": "unauthorized", "403": "forbidden", "404": "not found", "405": "method not allowed",
    "409": "conflict", "413": "payload too large", "422": "unprocessable entity", "429": "too many requests",
    "500": "internal server error", "502": "bad gateway", "503": "service unavailable", "504": "gateway timeout",
}.items()}


_NAME_PARTS = re.compile(r"[_\-./:\\]+")
# A token in which a name (replaced by NUL) stands between separators or at an end.
_SEPARATED = re.compile(r"^(?:.*[_./:])?\0(?:[_./:].*)?$", re.DOTALL)
# Obligation in other words than "must".
# "has to", a deadline, and a bound before a number (">= 370 req/s", "max 1200 EUR", "at least 3"), say "must".
_MUST = re.compile(r"\b(?:has|have|had|needs?|is required) to\b|\b(?:deadline|due)\b|"
                   r"(?:[<>≤≥]=?|\b(?:max|min|at most|at least)\b)\s*[€$£]?\s*\d")


_PER_UNIT = re.compile(r"^([\d.,]+)/([a-z]{2,})$")
_SHORT_CLOCK = re.compile(r"^\d:\d\d(?::\d\d)?$")
_WEEKDAYS = {day[:3]: stem(day) for day in ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                                             "sunday")}
WEEKDAYS = frozenset(_WEEKDAYS.values())


class Segment:
    """One searchable text of a window: its normalised form, its token set and its stemmed word set."""

    __slots__ = ("text", "tokens", "words", "joined", "multi", "tool", "lines", "halves", "_digests", "_parts")

    def __init__(self, text: str, *, joined: bool = False, multi: bool = False, tool: bool = False) -> None:
        self.joined = joined  # two adjacent summary lines read as one (not for an exit status: headers sit there)
        # A tool call with its output: many values and words of another thing, no claim about a setting unless it
        # names the setting in full or is the call the setting was read from.
        self.tool = tool
        self.multi = multi  # several sentences of free text, each also a segment (a value is read per sentence)
        self.text = normalise(text)
        # The lines it was read from (two for a joined segment): what a claim's own sentence is looked for in.
        self.lines = tuple(normalise(line) for line in text.splitlines() if line.strip()) or (self.text,)
        toks = tokens(self.text)
        self.tokens = set(toks)
        # Sub-parts of compound tokens (`tests/x.py::test_y` also holds `tests/x.py` and `test_y`).
        for t in toks:
            for part in t.split(":") if ":" in t else ():  # host:port, file.py:12
                if part:
                    self.tokens.add(part)
            for part in t.split(":"):
                pieces = re.split(r"[/\\]", part)
                for i in range(1, len(pieces)):  # a path also names its shorter tails (src/a/b.py holds a/b.py)
                    self.tokens.add("/".join(pieces[i:]))
        # A number written with thousands separators is also the number ("1,287" states 1287).
        self.tokens.update(m.group().replace(",", "") for m in _THOUSANDS.finditer(self.text))
        # A clock time without its leading zero is the same time ("6:00" states 06:00).
        self.tokens.update(f"0{t}" for t in toks if _SHORT_CLOCK.match(t))
        self.words = {stem(t) for t in toks if t.isalpha()}
        # A number per unit in one token ("700/month" of "€1,700/month", "370/s") is the number and the unit word.
        for t in toks:
            per = _PER_UNIT.match(t)
            if per is not None:
                self.tokens.add(per.group(1))
                self.words.add(stem(per.group(2)))
        # A weekday written short is the weekday ("Mon–Thu" says Monday and Thursday).
        self.words.update(_WEEKDAYS[t] for t in toks if t in _WEEKDAYS)
        if _MUST.search(self.text):  # "has to be done by 06:00" says "must"
            self.words.add("must")
        for code in HTTP_REASONS.keys() & self.tokens:  # "-> 404" says "Not Found"
            self.words |= HTTP_REASONS[code]
        for code, reason in HTTP_REASONS.items():  # and "Bad Gateway" says 502
            if len(reason) > 1 and reason <= self.words:
                self.tokens.add(code)
        self._digests: list[str] | None = None
        self._parts: set[str] | None = None
        # A joined segment's two lines as segments of their own (single-sentence lines only), set by its maker.
        self.halves: tuple[Segment, ...] = ()

    def in_compound(self, name: str) -> bool:
        """Whether a name is a whole part of a compound token (`ingest-11` of `ingest-11_run_time`)."""
        return any(name in _NAME_PARTS.split(t) or _SEPARATED.match(t.replace(name, "\0")) is not None
                   for t in self.tokens if name in t and t != name)

    def name_parts(self) -> set[str]:
        """The stemmed words inside compound names (`ingest-11_elapsed` holds elapsed, `run_time` run and time): a
        label written as an identifier still names its setting."""
        if self._parts is None:
            self._parts = {stem(part) for token in self.tokens if not token.isalpha()
                           for part in _NAME_PARTS.split(token) if part.isalpha() and len(part) > 1}
        return self._parts

    def has_anchor(self, anchor: str) -> bool:
        if anchor in self.tokens:
            return True
        place = _FILE_LINE.match(anchor)
        if place is not None:
            # A place is its file's line, the file named by its path or any tail of it ("merge.go:220" for
            # `/src/internal/merge/merge.go:220`: a summary drops the folders a stack trace prints).
            path = place.group(1).lstrip("/")
            tails = {"/".join(path.split("/")[i:]) for i in range(path.count("/") + 1)}
            return place.group(2) in self.tokens and (place.group(1) in self.tokens or bool(tails & self.tokens))
        if _DIGEST.match(anchor) and any(ch.isalpha() for ch in anchor):
            if self._digests is None:
                self._digests = [t for t in self.tokens if _SHORT_DIGEST.match(t)]
            return any(anchor.startswith(t) for t in self._digests)
        return False


@lru_cache(maxsize=4096)
def status_pattern(code: int) -> re.Pattern[str]:
    """A command's exit status stated in words: `exit code: 1`, `exited with 1`, `Process exited with code 1`,
    `exit_code: 1`, `(exit 1)`, `status 1`, `returned 1`; for 0 also passed/succeeded/ok, for others failed/error."""
    number = r"(?:exit(?:ed)?(?:[ _](?:with|code|status))*[: =]*|code[: =]+|status[: =]+|returned |rc[ =:]+)"
    words = r"pass(?:ed|es|ing)?|succeed(?:ed|s)?|success(?:ful(?:ly)?)?|ok|green|clean" if code == 0 else \
        r"fail(?:ed|s|ing|ure)?|errored|broke|crash(?:ed|es)?"
    return re.compile(rf"{number}\(?{code}\b|\b(?:{words})\b")


# A protocol and its version (`HTTP/1.1`, `TLS/1.3`): a failure line's framing, loose like its numbers.
_PROTOCOL = re.compile(r"^[a-z]+/\d+(?:\.\d+)*$")
# A measurement glued to its unit (`4.05s`, `120ms`, `512mb`): a failure line's detail, loose like its numbers.
_MEASURE = re.compile(r"^\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|b|kb|mb|gb|kib|mib|gib)$")


# A timestamp or a date of a log line (`2026-12-01t10:11:07z`, `10:11:07`): when it was said, loose like a pid.
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}(?:t[\d:.]+z?)?$|^\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?$")
# An error code: letters and digits (`e0382`, `ts2345`, `ora-00942`, `40p01`), what names a failure by itself.
_CODE = re.compile(r"^(?=.*\d)(?=.*[a-z])[a-z]{0,5}-?\d[\da-z]{1,7}$")


def names_of(anchors: tuple[str, ...]) -> list[str]:
    """A failure line's identifiers: its anchors that are not numbers, protocol versions, measures or timestamps."""
    return [a for a in anchors if not (is_number(a) or _PROTOCOL.match(a) or _MEASURE.match(a) or _STAMP.match(a))]


def is_code(anchor: str) -> bool:
    """An error code (`e0382`, `ts2345`, `ora-00942`, `40p01`): it names a failure by itself."""
    return _CODE.match(anchor) is not None


def is_number(anchor: str) -> bool:
    return _NUMBER.match(anchor) is not None


def _anchors_held(segment: Segment, anchors: tuple[str, ...], loose_numbers: bool) -> bool:
    """Every anchor; with `loose_numbers` (a failure line), every identifier and half its plain numbers and
    protocol versions (a paraphrase keeps the pod and the account, not always the pid, the line number or
    `HTTP/1.1`), all of them when the line has no identifier."""
    if not loose_numbers:
        return all(segment.has_anchor(a) for a in anchors)
    numbers = [a for a in anchors if is_number(a) or _PROTOCOL.match(a) or _MEASURE.match(a) or _STAMP.match(a)]
    names = [a for a in anchors if a not in numbers]
    if not names:  # the plain numbers carry the line (`HTTP/1.1 503 ...` is kept by 503)
        plain = [a for a in numbers if is_number(a)] or numbers
        return all(segment.has_anchor(a) for a in plain)
    return all(segment.has_anchor(a) for a in names) and \
        sum(1 for a in numbers if segment.has_anchor(a)) >= len(numbers) // 2


def states(segment: Segment, *, anchors: tuple[str, ...], words: tuple[str, ...], status: int | None = None,
           cover: float | None = None, loose_numbers: bool = False, values: int = 0) -> bool:
    """Whether a segment states a fact: every anchor, enough content words, and the exit status when there is one."""
    if not _anchors_held(segment, anchors, loose_numbers):
        return False
    if len(anchors) >= ALL_ANCHORS_SUFFICE and all(segment.has_anchor(a) for a in anchors):
        pass  # four identifiers and numbers, every one of them: the claim is this fact whatever its verbs
    elif words:
        # Values compared by what they are (`values`, checked by the caller) count as anchors here.
        pinned = len(anchors) + values
        need = cover if cover is not None else (
            NO_ANCHOR_WORD_COVER if not pinned else
            MANY_ANCHORS_WORD_COVER if pinned >= MANY_ANCHORS else WORD_COVER)
        held = sum(1 for w in words if w in segment.words)
        required = math.ceil(need * len(words) - 1e-9)
        if pinned:
            # A value compared by what it is, with an identifier beside it, pins the claim: two of its words
            # then suffice ("billing 13 budget: max 1200 EUR per month" for "... has to stay below EUR 1,200 a
            # month").
            required = min(required, ANCHORED_MAX_WORDS if not (values and anchors) else VALUED_MAX_WORDS)
        if held < max(1, required):
            return False
    elif not anchors and not values:
        return False
    return status is None or bool(status_pattern(status).search(segment.text))


@lru_cache(maxsize=4096)
def setting_words(name: str) -> frozenset[str]:
    """The stemmed words of a setting's name (`listen_port` gives listen and port; `suite wall time` three)."""
    parts = re.split(r"[_.\-\s]+|(?<=[a-z])(?=[A-Z])", name)
    return frozenset(stem(p.lower()) for p in parts if p.isalpha() and len(p) > 1 and p.lower() not in STOP_WORDS)


_NUMBERED = re.compile(r"\b([a-z][a-z_]{2,})[\s=:#]+(\d+)\b")


def about_another(segment: Segment, source: str) -> bool:
    """Whether a segment names a sibling of the setting's source and not the source itself: `checkout-10` where the
    setting was read from `checkout-11` (an id of the same shape, another thing), "batch 110" for `--batch 111`."""
    # A path's parts too: `stage-8` is a sibling of `env/stage-7.tfvars`'s stem.
    for anchor in dict.fromkeys((*anchors_of(source), *source_ids(source))):
        if not any(ch.isdigit() for ch in anchor) or not any(ch.isalpha() for ch in anchor):
            continue
        shape = re.sub(r"\d+", "#", anchor)
        if anchor not in segment.tokens and any(re.sub(r"\d+", "#", t) == shape or abbreviates(t, anchor) == "sibling"
                                                for t in segment.tokens):
            return True
    # A numbered thing: `--batch 111` in the source, "batch 110" (and no "batch 111") in the segment.
    for word, number in _NUMBERED.findall(source):
        said = {n for w, n in _NUMBERED.findall(segment.text) if w == word}
        if said and number not in said:
            return True
    return False


_RUNS = re.compile(r"[a-z]+|\d+|[^a-z\d]+")


@lru_cache(maxsize=65536)
def abbreviates(token: str, name: str) -> str | None:
    """Whether a token is a name written short, its words cut to letters of theirs (`pl-131.yaml` for
    `pipeline-131.yaml`, `stg-11` for `staging-11`): "same" when its numbers are the name's, "sibling" when they
    differ (another thing of that kind), else None. Only names with a digit and a word cut short count."""
    if token == name or not any(ch.isdigit() for ch in name):
        return None
    ours, theirs = _RUNS.findall(token), _RUNS.findall(name)
    if len(ours) != len(theirs):
        return None
    cut = False
    for a, b in zip(ours, theirs, strict=True):
        if a.isalpha() != b.isalpha() or a.isdigit() != b.isdigit():
            return None
        if a.isalpha() and a != b:
            if a[0] != b[0] or not _subsequence(a, b):  # shorter, as a != b
                return None
            cut = True
        elif not a.isalnum() and a != b:
            return None
    if not cut:
        return None
    same = all(a == b for a, b in zip(ours, theirs, strict=True) if a.isdigit())
    return "same" if same else "sibling"


def _subsequence(short: str, long: str) -> bool:
    letters = iter(long)
    return all(ch in letters for ch in short)


@lru_cache(maxsize=4096)
def source_ids(source: str) -> tuple[str, ...]:
    """The distinctive identifiers of where a setting was read (`shard_21`, `export/21`, `checkout-21`: a name with
    a digit and a letter), what a summary names the measured thing by when it leaves the setting's name out."""
    found = []
    for anchor in anchors_of(source):
        # A path's folders with a digit name the thing too (`web-11` of `web-11/package.json`).
        folders = anchor.split("/")
        # A file's stem also without folders (`results-13` of `results-13.bin`), when its extension is a word.
        name, dot, extension = folders[-1].rpartition(".")
        stem_ = name if dot and name and (len(folders) > 1 or extension.isalpha()) else ""
        # A path's last part too, a folder's or a file's (`spool-10` of `du -sh /var/lib/pipeline/spool-10`).
        last = folders[-1] if len(folders) > 1 else ""
        for part in (anchor, *folders[:-1], last, stem_):  # a file's stem (`ingest-11` of `logs/ingest-11.log`)
            if any(ch.isdigit() for ch in part) and any(ch.isalpha() for ch in part) and not part.startswith("-") \
                    and part not in found:
                found.append(part)
    return tuple(found)


def names_source(segment: Segment, source: str) -> bool:
    """Whether a segment names the thing a setting was read from ("/export/21 answers in 421 ms" for the
    `p95_latency` of `./scripts/latency --route /export/21`; "batch 31 takes 331 ms" for the mean time of
    `hyperfine 'node score.js --batch 31'`: an option and its number name what was run)."""
    if not source:
        return False
    return any(segment.has_anchor(a) or segment.in_compound(a) or
               any(abbreviates(t, a) == "same" for t in segment.tokens) for a in source_ids(source)) or \
        any(re.search(pattern, segment.text) for pattern in _option_patterns(source))


_OPTION = re.compile(r"(?<![\w-])--?([a-z][a-z-]{2,})[= ](\d+)\b")


@lru_cache(maxsize=4096)
def _option_patterns(source: str) -> tuple[str, ...]:
    """`--batch 31` of a command line, as the words a claim names it by: "batch 31", "batch-31", "batch_31", and
    the number before the name ("64 pages" for `--pages 64`)."""
    return tuple(pattern for name, number in _OPTION.findall(source) for words in [re.escape(name.replace("-", " "))]
                 for pattern in (rf"\b{words}[ _-]?{number}\b(?![.,]\d)", rf"(?<![\d.,]){number} {words}\b"))


def states_setting(segment: Segment, *, setting: str, value: str, source: str = "") -> bool:
    """Whether a segment states a setting's value: the setting named (its name, or one word of it, or the thing it
    was read from) and the value in any form that agrees (`states_value`), and not as the value of another thing
    of the same kind (`_about_another`). A distinctive value (a date, a version, a URL, an identifier with letters
    and digits) names its setting by itself: no other setting of the history has it."""
    parts = value.split(VALUE_GROUP_SEPARATOR)
    if not all(states_value(segment, part, as_version=is_version_setting(setting)) for part in parts):
        return False  # the cheap test first
    return names_setting(segment, setting=setting, source=source, parts=parts)


def names_setting(segment: Segment, *, setting: str, source: str = "", parts: list[str] | tuple[str, ...] = ()) -> bool:
    """Whether a segment names a setting: by its name (in full, or one word of it), the thing it was read from, or
    a distinctive value of it (`parts`), and not as a sibling of its source (`about_another`)."""
    words = setting_words(setting)
    in_full = setting in segment.tokens or setting.replace("_", "") in segment.tokens or \
        setting.replace("_", "-") in segment.tokens
    if segment.tool:
        return _same_call(segment, source) or in_full and not (source and about_another(segment, source))
    named = in_full or bool(words & segment.words) or \
        bool(words & segment.name_parts()) or names_source(segment, source) or any(distinctive(part) for part in parts)
    return named and not (source and about_another(segment, source))


def _same_call(segment: Segment, source: str) -> bool:
    """Whether a tool segment is the call a setting was read from (its command line), run again."""
    return bool(source) and normalise(source) in segment.text


# A row is stated by a segment holding more than this share of its cells (its name's and its values').
ROW_SHARE = 0.5


def states_row(segment: Segment, row: tuple[str, ...], row_name: str, source: str = "",
               values_in: Segment | None = None) -> bool:
    """Whether a segment states most of a table row (`kubectl get hpa`, `helm list`, `df -h`, `docker images`): the
    row named (by a cell of its name or the thing the table was read from), one of its values at least, and more
    than half of its cells, name and values, each value in any form that agrees (`states_value`). A summary
    keeping a `df` row's use and free space keeps its size too; one keeping a single cell of a wide row keeps that
    cell only (`states_setting`). `values_in`: the line of a two-line segment that must hold the values (a YAML
    item's value under its topic), so that a neighbouring claim's values do not count."""
    if not row or segment.tool and not _same_call(segment, source):
        return False
    stated = sum(states_value(values_in or segment, value) for value in row)
    if not stated:
        return False
    parts = [p for p in re.split(r"\s+", row_name.lower()) if p]
    named = sum(any(q in segment.tokens or segment.in_compound(q) or stem(q) in segment.words
                    for q in re.split(r"[:]+", p) if q) for p in parts)
    # Named by the thing the table was read from (`df -h /data/x` names the row of /data/x), the row's own name
    # cells are not asked for.
    if named + stated <= ROW_SHARE * ((len(parts) if named else 0) + len(row)):
        return False
    return (named > 0 or names_source(segment, source)) and not (source and about_another(segment, source))


def is_version_setting(setting: str) -> bool:
    """A setting whose value is a version (`version`, `openjdk_version`, `release`): 16.3 is not 16.30 or 16."""
    return "version" in setting or "release" in setting


@lru_cache(maxsize=16384)
def distinctive(value: str) -> bool:
    """A value no other setting is likely to share: a date, a version with two dots or more, a URL, an identifier of
    six characters or more with letters and digits (not a number with a unit)."""
    value = value.strip().strip("\"'`")
    if date_of(value) is not None or "://" in value or address_of(value) is not None:
        return True
    version = version_of(value)
    if version is not None and version.count(".") >= 2:
        return True
    return len(value) >= 6 and " " not in value and any(ch.isdigit() for ch in value) and \
        sum(ch.isalpha() for ch in value) >= 2 and quantity_of(value) is None


def states_value(segment: Segment, value: str, *, as_version: bool = False) -> bool:
    """Whether a segment states a value, compared by what it is (`values.py`): a number with a unit in any unit
    that agrees, a date on the same day in any format, a version with the same dotted digits, a plain number
    rounded or not, as a fraction or a percentage; else the value's tokens."""
    kind, wanted = _wanted(value, as_version)
    if kind == "quantity":
        return states_quantity(segment.text, wanted)
    if kind == "date":
        return wanted in dates(segment.text)
    if kind == "version":
        return wanted in versions(segment.text) or any(_VERSION_TOKEN.sub("", t) == wanted for t in segment.tokens
                                                       if wanted in t)
    if kind == "address":
        return states_address(segment.text, *wanted)
    if kind == "number":
        text = _unnumbered(segment.text)
        return any(numbers_agree(wanted, said) for said in (*numbers(text), *comma_decimals(text))) or \
            wanted[0] in dot_grouped(text) or states_byte_count(text, wanted[0])
    return bool(wanted) and all(t in segment.tokens or _HEX.fullmatch(t) and t in _unseparated(segment.tokens)
                                for t in wanted)


# A numbered list's marker ("3. ", "3) "): the item's place in the summary, not a value it states.
_LIST_MARKER = re.compile(r"^(\s*)\d{1,3}[.)](?=\s)", re.MULTILINE)


@lru_cache(maxsize=16384)
def _unnumbered(text: str) -> str:
    return _LIST_MARKER.sub(r"\1", text)


# A hex identifier (a certificate serial, a fingerprint, a MAC) is the same written in pairs: `3a:1f:22:...` and
# `3A1F22...` are one serial.
_HEX = re.compile(r"[0-9a-f]{8,}")


def _unseparated(found: frozenset[str] | set[str]) -> set[str]:
    return {t.replace(":", "").replace("-", "") for t in found if ":" in t or "-" in t}


@lru_cache(maxsize=16384)
def _wanted(value: str, as_version: bool) -> tuple[str, Any]:
    """What a value is, read once: a quantity, a date, a version, a plain number, else its tokens."""
    # An assignment's operator left before the value (`PARALLEL := 3` read as "= 3") is not part of it.
    value = value.strip().lstrip("=:").strip() or value.strip()
    # A rate (`1270.27/sec`, "170 requests per second") is compared per second in any time unit.
    if rate_spans(value) == [(0, len(value))]:
        return "quantity", rates(value)[0]
    quantity = quantity_of(value)
    if quantity is not None:
        return "quantity", quantity
    day = date_of(value)
    if day is not None:
        return "date", day
    address = address_of(value)
    if address is not None:
        return "address", address
    bare = value.lstrip("vV")
    version = version_of(value) or (bare if as_version and _DOTTED.fullmatch(bare) else None)
    if version is not None:
        return "version", version
    number = number_of(value)
    if number is not None:
        return "number", number
    return "tokens", tuple(tokens(normalise(value)))


_DOTTED = re.compile(r"\d+(?:\.\d+)+")
# A version token's letters before its digits and anything after them (`go1.22.7`, `v16.3`, `21.0.4+7-ubuntu`).
_VERSION_TOKEN = re.compile(r"^[a-z]*[-_]?(?=\d)|(?<=\d)[-+][\w.+-]*$")


# A number and its unit, as a fact's text writes it ("2 GB", "30 s", "512M").
_QUANTITY_SPAN = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*\s?(?:[a-zµ]+\b|%)", re.IGNORECASE)


# An amount of money: a currency's code or sign and a number ("EUR 1,200", "€1,200", "1200 EUR", "$3.5k").
_MONEY = re.compile(r"(?:\b(?:EUR|USD|GBP|CHF|JPY)|[€$£¥])\s?(?P<n>\d[\d,.]*\d(?:[kKmM]\b)?|\d)|"
                    r"(?<![\w.])(?P<n2>\d[\d,.]*\d|\d)\s?(?:EUR|USD|GBP|CHF|JPY|euros?|dollars?)\b")


@lru_cache(maxsize=8192)
def stated_values(text: str) -> tuple[tuple[tuple[str, Any], ...], frozenset[str]]:
    """The dates and quantities a fact's text states (each as ("date", day) or ("quantity", Quantity)), and the
    tokens and stemmed words they were written in (which a restatement in another format need not repeat)."""
    values: list[tuple[str, Any]] = []
    covered: set[str] = set()
    for pattern in DATE_PATTERNS:
        for match in pattern.finditer(text):
            day = date_of(match.group())
            if day is not None and ("date", day) not in values:
                values.append(("date", day))
                covered |= _written_in(match.group())
    for match in _MONEY.finditer(text):  # an amount of money is its number, with or without separators
        number = number_of(match.group("n") or match.group("n2"))
        if number is not None and ("number", number) not in values:
            values.append(("number", number))
            covered |= _written_in(match.group())
    for start, end in rate_spans(text):  # a rate is compared per second ("170 requests per second", "10,200/min")
        (rate,) = rates(text[start:end])
        values.append(("quantity", rate))
        covered |= _written_in(text[start:end])
    for match in _QUANTITY_SPAN.finditer(text):
        quantity = quantity_of(match.group())
        if quantity is not None and not any(match.group() in w for w in covered):
            values.append(("quantity", quantity))
            covered |= _written_in(match.group())
    return tuple(values), frozenset(covered)


def _written_in(text: str) -> set[str]:
    found = set(tokens(normalise(text))) | {stem(t) for t in tokens(normalise(text)) if t.isalpha()}
    return found | {a for a in anchors_of(text)}


def holds_value(segment: Segment, value: tuple[str, Any]) -> bool:
    """Whether a segment states a date (the same day in any format) or a quantity (in any unit that agrees)."""
    kind, wanted = value
    if kind == "date":
        return wanted in dates(segment.text)
    if kind == "number":
        return any(numbers_agree(wanted, said) for said in (*numbers(segment.text), *comma_decimals(segment.text)))
    return states_quantity(segment.text, wanted)


# A number and the words beside it, a space apart ("ahead 7", "45 insertions", "9 behind"): the words label it.
_LABEL_TOKEN = re.compile(r"[a-z]{3,}|\d+(?:\.\d+)?|\S")


@lru_cache(maxsize=8192)
def _labels(text: str) -> tuple[tuple[str, str], ...]:
    """(label, number) pairs of a text, a label being a word (not a stop word) a single space from its number."""
    lowered = text.lower()
    toks = [(m.group(), m.start(), m.end()) for m in _LABEL_TOKEN.finditer(lowered)]
    found = []
    for i, (tok, start, end) in enumerate(toks):
        if not tok[0].isdigit() or (start and (lowered[start - 1].isalnum() or lowered[start - 1] in "._-")):
            continue
        for j in (i - 1, i + 1):
            if 0 <= j < len(toks):
                word, w_start, w_end = toks[j]
                gap = lowered[w_end:start] if j < i else lowered[end:w_start]
                if word.isalpha() and gap == " " and word not in STOP_WORDS:
                    found.append((word, tok))
    return tuple(found)


def mislabelled(fact_text: str, value: str, segment: Segment) -> bool:
    """Whether a claim gives one of a value's numbers' labels to another number ("9 ahead / 7 behind" for
    `[ahead 7, behind 9]`): the numbers are there, each said to be the other thing."""
    numbers_ = {part for part in value.split(VALUE_GROUP_SEPARATOR) if re.fullmatch(r"\d+(?:\.\d+)?", part)}
    if not numbers_:
        return False
    said = _labels(segment.text)
    for label, number in _labels(fact_text):
        if number in numbers_:
            beside = {n for word, n in said if word == label}
            if beside and number not in beside:
                return True
    return False
