"""Realistic tool output of a requested size, produced fast (issue 5: simulated tools).

Large outputs (up to a few hundred thousand tokens) are assembled from *pools*: a few hundred realistic lines or
blocks per kind of text (pytest, cargo, jest, service logs, compiler output, file listings, diffs, source code, grep
hits), built once per process from a fixed seed and measured once with the tokenizer. An output is then a rendered
frame (header, failures, summary; measured once) plus pool entries picked with the caller's rng until the size
budget is spent, so no line is ever tokenized twice and the result is deterministic for a given rng state.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from compaction_app.engine.tokens import CODEX_ESTIMATOR, DEFAULT_ENCODING, counter

from .distributions import Size

SAMPLE_TIMESTAMP = "2026-11-29T08:00:00.000Z"
POOL_SIZE = 400

MODULES = (
    "billing", "ledger", "parser", "scheduler", "auth", "storage", "cache", "api", "models", "reports",
    "invoices", "accounts", "search", "sync", "export", "notifications", "pipeline", "config", "metrics", "users",
)
NOUNS = (
    "invoice", "amount", "header", "token", "session", "record", "batch", "entry", "payload", "cursor", "schema",
    "currency", "period", "account", "row", "snapshot", "request", "response", "limit", "window", "offset", "digest",
)
VERBS = (
    "parse", "split", "round", "load", "save", "merge", "validate", "render", "compute", "resolve", "fetch",
    "encode", "decode", "apply", "normalize", "flush", "retry", "build", "reject", "accept", "expire", "sort",
)
SERVICES = ("api-gateway", "billing-worker", "ledger-sync", "scheduler", "auth", "export-runner")
CRATES = (
    ("serde", "1.0.215"), ("serde_json", "1.0.133"), ("tokio", "1.41.1"), ("anyhow", "1.0.93"), ("regex", "1.11.1"),
    ("clap", "4.5.21"), ("tracing", "0.1.40"), ("bytes", "1.8.0"), ("hyper", "1.5.1"), ("thiserror", "2.0.3"),
    ("chrono", "0.4.38"), ("rand", "0.8.5"), ("itertools", "0.13.0"), ("once_cell", "1.20.2"), ("memchr", "2.7.4"),
)


PAST = {"split": "split", "build": "built", "sort": "sorted", "fetch": "fetched", "flush": "flushed"}


def _plural(noun: str) -> str:
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("ch", "sh", "s", "x")) else "s")


def _third_person(verb: str) -> str:
    return _plural(verb)


def _past(verb: str) -> str:
    if verb in PAST:
        return PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _name(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def _camel(rng: random.Random) -> str:
    return rng.choice(VERBS) + rng.choice(NOUNS).capitalize()


def _py_path(rng: random.Random) -> str:
    return f"src/{rng.choice(MODULES)}/{rng.choice(NOUNS)}.py"


def _test_id(rng: random.Random) -> str:
    param = f"[case-{rng.randint(1, 9)}]" if rng.random() < 0.2 else ""
    return f"tests/{rng.choice(MODULES)}/test_{rng.choice(NOUNS)}.py::test_{_name(rng)}{param}"


# --- pool builders: each returns one entry (a line or a multi-line block) --------------------------------------------

def _pytest_entry(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.85:
        return f"{_test_id(rng)} PASSED"
    if r < 0.92:
        return f"{_test_id(rng)} SKIPPED (requires {rng.choice(('postgres', 'redis', 'network', 'a GPU'))})"
    if r < 0.95:
        return f"{_test_id(rng)} XFAIL ({rng.choice(NOUNS)} rounding is still wrong upstream)"
    mod = rng.choice(MODULES)
    return (
        "------------------------------ Captured log call -------------------------------\n"
        f"INFO     {mod}.{rng.choice(NOUNS)}:{rng.choice(NOUNS)}.py:{rng.randint(10, 400)} "
        f"{rng.choice(VERBS)} {rng.choice(NOUNS)} id={rng.randint(1000, 9999)} took {rng.randint(1, 90)}ms\n"
        f"WARNING  {mod}.retry:retry.py:{rng.randint(10, 99)} attempt {rng.randint(1, 3)} failed; retrying"
    )


def _cargo_entry(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.05:
        name, version = rng.choice(CRATES)
        return f"   Compiling {name} v{version}"
    if r < 0.3:
        var = rng.choice(NOUNS)
        line = rng.randint(10, 600)
        return (
            f"warning: unused variable: `{var}`\n"
            f"  --> src/{rng.choice(MODULES)}.rs:{line}:13\n"
            "   |\n"
            f"{line} |         let {var} = self.{rng.choice(NOUNS)}.clone();\n"
            "   |             ^^^^ help: if this is intentional, prefix it with an underscore\n"
            "   |\n"
            "   = note: `#[warn(unused_variables)]` on by default"
        )
    return f"test {rng.choice(MODULES)}::tests::{_name(rng)} ... ok"


def _jest_entry(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return f"PASS src/{rng.choice(MODULES)}/{_camel(rng)}.test.ts ({rng.randint(1, 9)}.{rng.randint(100, 999)} s)"
    return f"  ✓ {_third_person(rng.choice(VERBS))} the {rng.choice(NOUNS)} when {rng.choice(NOUNS)} is empty ({rng.randint(1, 99)} ms)"


LOG_LEVELS = ("INFO ", "INFO ", "INFO ", "DEBUG", "DEBUG", "WARN ", "ERROR")


def _log_entry(rng: random.Random) -> str:
    level = rng.choice(LOG_LEVELS)
    svc = rng.choice(SERVICES)
    rid = f"{rng.getrandbits(48):012x}"
    r = rng.random()
    if r < 0.45:
        method = rng.choice(("GET", "GET", "POST", "PUT", "DELETE"))
        status = rng.choice((200, 200, 200, 201, 204, 304, 400, 404, 409, 500, 503))
        return (
            f"{level} [{svc}] request_id={rid} {method} /api/v1/{rng.choice(MODULES)}/{rng.randint(1000, 99999)} "
            f"status={status} duration_ms={rng.randint(1, 2500)}"
        )
    if r < 0.8:
        return (
            f"{level} [{svc}] {rng.choice(MODULES)}.{rng.choice(VERBS)}: {_past(rng.choice(VERBS))} "
            f"{rng.randint(1, 500)} {_plural(rng.choice(NOUNS))} in batch {rng.randint(1, 9999)} (queue depth {rng.randint(0, 64)})"
        )
    if r < 0.95:
        return (
            f"WARN  [{svc}] {rng.choice(NOUNS)} pool exhausted, waited {rng.randint(5, 900)}ms for a connection "
            f"(size={rng.choice((10, 20, 50))}, in_use={rng.randint(8, 50)})"
        )
    mod = rng.choice(MODULES)
    return (
        f"ERROR [{svc}] request_id={rid} unhandled exception in {mod}.{_name(rng)}\n"
        "Traceback (most recent call last):\n"
        f'  File "/srv/app/{_py_path(rng)}", line {rng.randint(10, 500)}, in {_name(rng)}\n'
        f"    return self.{_name(rng)}({rng.choice(NOUNS)}, timeout=self.timeout)\n"
        f'  File "/srv/app/{_py_path(rng)}", line {rng.randint(10, 500)}, in {_name(rng)}\n'
        f"    raise {rng.choice(('TimeoutError', 'KeyError', 'ValueError', 'ConnectionResetError'))}"
        f"({rng.choice(NOUNS)!r})"
    )


def _build_entry(rng: random.Random) -> str:
    mod, noun = rng.choice(MODULES), rng.choice(NOUNS)
    if rng.random() < 0.8:
        return f"gcc -O2 -g -Wall -Wextra -Iinclude -c src/{mod}/{noun}.c -o build/{mod}/{noun}.o"
    line = rng.randint(10, 900)
    return (
        f"src/{mod}/{noun}.c:{line}:{rng.randint(3, 40)}: warning: comparison of integer expressions of different "
        "signedness: 'int' and 'size_t' [-Wsign-compare]\n"
        f"  {line} |     for (int i = 0; i < {noun}->len; i++) {{\n"
        "      |                       ^"
    )


def _listing_entry(rng: random.Random) -> str:
    ext = rng.choice((".py", ".py", ".py", ".rs", ".ts", ".md", ".toml", ".json"))
    return f"./src/{rng.choice(MODULES)}/{rng.choice(NOUNS)}/{_name(rng)}{ext}"


def _python_block(rng: random.Random) -> str:
    fn, arg, other = _name(rng), rng.choice(NOUNS), rng.choice(NOUNS)
    body = [
        f"def {fn}({arg}: {rng.choice(('str', 'int', 'dict[str, Any]', 'Decimal', 'list[Row]'))}, "
        f"*, {other}: int = {rng.randint(0, 100)}) -> {rng.choice(('bool', 'int', 'str', 'Decimal', 'None'))}:",
        f'    """{rng.choice(VERBS).capitalize()} the {arg} and {rng.choice(VERBS)} its {other}."""',
    ]
    for _ in range(rng.randint(2, 7)):
        r = rng.random()
        if r < 0.3:
            body.append(f"    if {arg} is None or {other} < {rng.randint(0, 9)}:")
            body.append(f"        raise ValueError(f\"bad {arg}: {{{arg}!r}}\")")
        elif r < 0.6:
            body.append(f"    {rng.choice(NOUNS)} = {_name(rng)}({arg}, {other}={other})")
        elif r < 0.8:
            item = rng.choice(NOUNS)
            body.append(f"    for {item} in {arg}.{_plural(rng.choice(NOUNS))}:")
            body.append(f"        total += {item}.{rng.choice(NOUNS)}")
        else:
            body.append(f"    logger.debug(\"{fn}: %s\", {arg})")
    body.append(f"    return {rng.choice((arg, other, 'total', 'None', 'True'))}")
    return "\n".join(body) + "\n\n"


def _braced_function(rng: random.Random, head: str, tail: str, *, assign, guard, loop) -> str:
    """A brace language's function: 2 to 6 statements drawn from the same mix (an assignment, a guard, a loop);
    the language's templates (functions of nothing, drawing from `rng` as they write) say how each is spelled."""
    lines = [head]
    for _ in range(rng.randint(2, 6)):
        r = rng.random()
        lines.append(assign() if r < 0.4 else guard() if r < 0.7 else loop())
    lines.append(tail)
    return "\n".join(lines)


def _rust_block(rng: random.Random) -> str:
    fn, arg = _name(rng), rng.choice(NOUNS)
    return _braced_function(
        rng, f"pub fn {fn}({arg}: &{rng.choice(('str', 'Record', 'Header', '[u8]'))}) -> Result<usize, Error> {{",
        "    Ok(total)\n}\n",
        assign=lambda: f"    let {rng.choice(NOUNS)} = {_name(rng)}({arg})?;",
        guard=lambda: f"    if {arg}.is_empty() {{\n        return Err(Error::Empty(\"{arg}\"));\n    }}",
        loop=lambda: f"    for item in {arg}.iter() {{\n        total += item.{rng.choice(NOUNS)}();\n    }}",
    )


def _typescript_block(rng: random.Random) -> str:
    fn, arg = _camel(rng), rng.choice(NOUNS)
    return _braced_function(
        rng, f"export function {fn}({arg}: {rng.choice(('string', 'number', 'Row[]', 'Payload'))}): "
             f"{rng.choice(('boolean', 'number', 'string', 'void'))} {{",
        "  return total;\n}\n",
        assign=lambda: f"  const {rng.choice(NOUNS)} = {_camel(rng)}({arg});",
        guard=lambda: f"  if (!{arg}) {{\n    throw new Error(`missing {arg}`);\n  }}",
        loop=lambda: f"  for (const item of {arg}) {{\n    total += item.{rng.choice(NOUNS)};\n  }}",
    )


def _text_entry(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return f"## {rng.choice(VERBS).capitalize()} {_plural(rng.choice(NOUNS))}\n"
    kind = rng.choice(("module", "service", "job", "endpoint"))
    return (
        f"The {rng.choice(NOUNS)} {kind} {_third_person(rng.choice(VERBS))} each "
        f"{rng.choice(NOUNS)} before it {_third_person(rng.choice(VERBS))} the {rng.choice(NOUNS)}; see `{_py_path(rng)}`."
    )


def _diff_entry(rng: random.Random) -> str:
    start = rng.randint(1, 400)
    lines = [f"@@ -{start},7 +{start},8 @@ def {_name(rng)}("]
    for _ in range(rng.randint(4, 9)):
        mark = rng.choice((" ", " ", " ", "-", "+", "+"))
        lines.append(f"{mark}    {rng.choice(NOUNS)} = {_name(rng)}({rng.choice(NOUNS)}, strict={rng.random() < 0.5})")
    return "\n".join(lines)


GREP_TEMPLATES = (
    "def {q}(self, value):",
    "    result = {q}(payload, strict=True)",
    "from .{mod} import {q}",
    "    # TODO: {q} should handle an empty {noun}",
    '        logger.debug("{q} took %.2fms", elapsed)',
    "    return self.{q}({noun})",
    "        assert {q}({noun}) == expected",
)


def _grep_entry(rng: random.Random) -> str:
    template = rng.choice(GREP_TEMPLATES).replace("{mod}", rng.choice(MODULES)).replace("{noun}", rng.choice(NOUNS))
    prefix = rng.choice(("src", "src", "tests"))
    return f"{prefix}/{rng.choice(MODULES)}/{rng.choice(NOUNS)}.py:{rng.randint(1, 700)}:{template}"


POOL_BUILDERS: dict[str, Callable[[random.Random], str]] = {
    "pytest": _pytest_entry,
    "cargo": _cargo_entry,
    "jest": _jest_entry,
    "log": _log_entry,
    "build": _build_entry,
    "listing": _listing_entry,
    "diff": _diff_entry,
    "python": _python_block,
    "rust": _rust_block,
    "typescript": _typescript_block,
    "text": _text_entry,
    "grep": _grep_entry,
}


@dataclass(frozen=True)
class Pool:
    entries: tuple[str, ...]
    costs: tuple[int, ...]  # in the budget's unit, newline included
    mean_cost: float


def _cost_fn(unit: str, counter_name: str) -> Callable[[str], int]:
    if unit == "bytes" or counter_name == CODEX_ESTIMATOR:
        # The estimator is bytes/4, so a byte budget of 4x the tokens is exact and needs no tokenizer.
        return lambda text: len(text.encode("utf-8"))
    count = counter(counter_name).count_text
    return count


@cache
def pool(kind: str, unit: str, counter_name: str) -> Pool:
    """The pool for one kind of text, measured in `unit` (built once per process)."""
    rng = random.Random(f"pool:{kind}")
    make = POOL_BUILDERS[kind]
    entries = tuple(make(rng) for _ in range(POOL_SIZE))
    cost = _cost_fn(unit, counter_name)
    prefix = SAMPLE_TIMESTAMP + " " if kind == "log" else ""
    # The grep query placeholder is measured as one short word; Budget.fill adds the real query's cost per entry.
    costs = tuple(cost(prefix + e.replace("{q}", "x") + "\n") for e in entries)
    return Pool(entries, costs, sum(costs) / len(costs))


class Budget:
    """How much text is left to produce, in the unit the tokenizer/bytes decide."""

    def __init__(self, size: Size, counter_name: str = DEFAULT_ENCODING) -> None:
        self.counter_name = counter_name
        estimator = counter_name == CODEX_ESTIMATOR and size.unit == "tokens"
        self.unit = "bytes" if estimator else size.unit
        self.remaining = size.amount * 4 if estimator else size.amount
        self._cost = _cost_fn(self.unit, counter_name)

    def cost(self, text: str) -> int:
        return self._cost(text)

    def spend(self, text: str) -> str:
        """Charge a rendered frame part (measured once, whole) and return it."""
        self.remaining -= self._cost(text)
        return text

    def fill(self, kind: str, rng: random.Random, *, extra_cost: int = 0) -> list[str]:
        """Pool entries picked by `rng` until the budget is spent (never overshooting by a whole entry)."""
        p = pool(kind, self.unit, self.counter_name)
        out: list[str] = []
        misses = 0
        n = len(p.entries)
        while self.remaining > 0 and misses < 16:
            batch = max(16, int(self.remaining / (p.mean_cost + extra_cost)) + 1)
            for i in rng.choices(range(n), k=batch):
                c = p.costs[i] + extra_cost
                if c > self.remaining:
                    misses += 1
                    if misses >= 16:
                        break
                    continue
                out.append(p.entries[i])
                self.remaining -= c
        return out


def timestamps(rng: random.Random, count: int) -> list[str]:
    """`count` increasing ISO timestamps of a fixed width (so their token cost never varies)."""
    ms = rng.randint(0, 20 * 3600 * 1000)
    out = []
    for _ in range(count):
        ms += rng.randint(0, 400)
        h, rem = divmod(ms // 1000, 3600)
        m, s = divmod(rem, 60)
        out.append(f"2026-11-29T{h % 24:02d}:{m:02d}:{s:02d}.{ms % 1000:03d}Z")
    return out
