"""Simulated tools offered to the model, and the dispatcher that answers its function calls (issue 5).

Each tool has a Responses-API tool spec (`{"type": "function", "name", "description", "parameters"}`) and
`run(arguments, *, rng) -> ToolResult`. Output sizes follow the scenario's size distributions; content is
deterministic for a given rng state (read_file: for a given tool seed and path, so a file reads the same twice).
`new_context` is the token-budget tool of spec §4.4: calling it requests a new context window.
"""

from __future__ import annotations

import json
import random
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from compaction_app.engine.items import Item, output_call_id
from compaction_app.engine.tokens import DEFAULT_ENCODING

from . import realistic_text as rt
from .distributions import LogNormal, SizeDistribution, parse_distribution
from .errors import SpecError

SHELL_FLAVORS = ("pytest", "cargo", "jest", "log", "build", "listing", "diff")


class ToolArgumentError(ValueError):
    """The model called a tool with arguments it cannot run with; the message goes back to the model."""


@dataclass(frozen=True)
class ToolResult:
    output: str
    new_window_requested: bool = False


@dataclass(frozen=True)
class ToolSettings:
    """A scenario's options for one tool (`[tools.<name>]`); None means the tool's default."""

    output: SizeDistribution | None = None
    failure_rate: float | None = None
    default_flavor: str | None = None


def call_rng(seed: int | str, *parts: object) -> random.Random:
    """A Random seeded from the session seed and e.g. (turn number, call id): the same in every process."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))


def _function_spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
    }


class _FunctionTool:
    """A tool the model calls as a function: its spec is its name, the class's `description` and `parameters`
    (JSON Schema properties, those in `required` to be given)."""

    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]] = {}
    required: ClassVar[tuple[str, ...]] = ()

    def spec(self) -> dict[str, Any]:
        # The property schemas are the class's, shared by every spec (a deep copy per turn would cost more than the
        # rest of it): nothing changes a spec once it is made.
        return _function_spec(self.name, self.description, dict(self.parameters), list(self.required))


def _require_str(arguments: Mapping[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolArgumentError(f"missing or empty string argument '{key}'")
    return value


def _lines(parts: list[str]) -> str:
    return "\n".join(parts)


def _charge(budget: rt.Budget, text: str) -> str:
    budget.spend(text + "\n")
    return text


# --- shell ------------------------------------------------------------------------------------------------------------

# What a command's words say about the output it prints, the first match winning.
_FLAVOR_PATTERNS = (
    (re.compile(r"\bpytest\b|\btox\b|manage\.py test"), "pytest"),
    (re.compile(r"\bcargo\b"), "cargo"),
    (re.compile(r"\b(npm|npx|yarn|pnpm|jest|vitest)\b"), "jest"),
    (re.compile(r"\.log\b|\bjournalctl\b|\blogs\b"), "log"),
    (re.compile(r"\bgit (diff|show)\b|\bgit log -p\b"), "diff"),
    (re.compile(r"^(ls|find|tree|fd)\b|\bgit (ls-files|status)\b"), "listing"),
    (re.compile(r"\b(make|gcc|clang|cmake|ninja|go build|mvn|gradle)\b"), "build"),
)


def shell_flavor(command: str, default: str = "build") -> str:
    """Which kind of output a command prints, guessed from its words."""
    words = command.lower()
    return next((flavor for pattern, flavor in _FLAVOR_PATTERNS if pattern.search(words)), default)


def _pytest(budget: rt.Budget, rng: random.Random, cwd: str, failing: bool) -> tuple[int, str]:
    est = max(1, int(budget.remaining / rt.pool("pytest", budget.unit, budget.counter_name).mean_cost))
    head = (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0\n"
        f"rootdir: {cwd}\nconfigfile: pyproject.toml\nplugins: django-4.9.0, asyncio-0.24.0\n"
        "collected @COLLECTED@ items\n"
    )
    failed = [rt._test_id(rng) for _ in range(rng.randint(1, 3))] if failing else []
    blocks = []
    for test_id in failed:
        name = test_id.rsplit("::", 1)[1].split("[")[0]
        noun, fn = rng.choice(rt.NOUNS), rt._name(rng)
        want, got = rng.randint(1, 999), rng.randint(1, 999)
        blocks.append(
            f"{'_' * 25} {name} {'_' * 25}\n\n"
            f"    def {name}():\n"
            f"        {noun} = make_{noun}(total={want}, parts={rng.randint(2, 5)})\n"
            f">       assert {fn}({noun}) == {want}\n"
            f"E       AssertionError: assert {got} == {want}\n"
            f"E        +  where {got} = {fn}(<{noun.capitalize()} id={rng.randint(1, 99)}>)\n\n"
            f"{test_id.split('::')[0]}:{rng.randint(10, 300)}: AssertionError"
        )
    seconds = f"{rng.uniform(0.5, 90):.2f}"
    summary = "".join(f"FAILED {t} - AssertionError\n" for t in failed)
    tail_template = (
        ("=================================== FAILURES ===================================\n" if blocks else "")
        + "\n".join(blocks)
        + ("\n=========================== short test summary info ============================\n" if blocks else "")
        + summary
        + "@RESULT@"
    )

    def result_line(passed: int, skipped: int) -> str:
        counts = ", ".join(
            c for c in (
                f"{len(failed)} failed" if failed else "",
                f"{passed} passed",
                f"{skipped} skipped" if skipped else "",
            ) if c
        )
        return f"{'=' * 20} {counts} in {seconds}s {'=' * 20}"

    # Counts are only known after the body is drawn; the frame is measured with an estimate (a token or two off).
    budget.spend(head.replace("@COLLECTED@", str(est)) + "\n")
    budget.spend(tail_template.replace("@RESULT@", result_line(est, 0)) + "\n")
    body = budget.fill("pytest", rng)
    for test_id in failed:
        body.insert(rng.randint(0, len(body)), f"{test_id} FAILED")
    passed = sum(e.endswith(" PASSED") for e in body)
    skipped = sum(" SKIPPED " in e for e in body)
    text = _lines([head.replace("@COLLECTED@", str(passed + skipped + len(failed))), *body,
                   tail_template.replace("@RESULT@", result_line(passed, skipped))])
    return (1 if failed else 0), text


def _cargo(budget: rt.Budget, rng: random.Random, cwd: str, failing: bool) -> tuple[int, str]:
    crate = cwd.rstrip("/").rsplit("/", 1)[-1] or "app"
    head = _charge(budget, (
        f"   Compiling {crate} v0.4.2 ({cwd})\n"
        f"    Finished `test` profile [unoptimized + debuginfo] target(s) in {rng.uniform(1, 60):.2f}s\n"
        f"     Running unittests src/lib.rs (target/debug/deps/{crate}-{rng.getrandbits(64):016x})\n"
    ))
    failed = [f"{rng.choice(rt.MODULES)}::tests::{rt._name(rng)}" for _ in range(rng.randint(1, 2))] if failing else []
    failure_text = "".join(
        f"---- {t} stdout ----\n"
        f"thread '{t}' panicked at src/{t.split('::')[0]}.rs:{rng.randint(10, 500)}:9:\n"
        "assertion `left == right` failed\n"
        f"  left: {rng.randint(0, 99)}\n right: {rng.randint(100, 199)}\n"
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n"
        for t in failed
    )
    seconds = f"{rng.uniform(0.01, 30):.2f}"
    tail = _charge(budget, (
        (f"\nfailures:\n\n{failure_text}failures:\n" + "".join(f"    {t}\n" for t in failed) if failed else "")
        + f"\ntest result: {'FAILED' if failed else 'ok'}. 000 passed; {len(failed)} failed; 0 ignored; "
        f"0 measured; 0 filtered out; finished in {seconds}s"
        + ("\n\nerror: test failed, to rerun pass `--lib`" if failed else "")
    ))
    body = budget.fill("cargo", rng)
    for t in failed:
        body.insert(rng.randint(0, len(body)), f"test {t} ... FAILED")
    passed = sum(e.endswith(" ... ok") for e in body)
    return (101 if failed else 0), _lines([head, *body, tail.replace("000 passed", f"{passed} passed", 1)])


def _jest(budget: rt.Budget, rng: random.Random, cwd: str, failing: bool) -> tuple[int, str]:
    head = _charge(budget, "\n> app@1.4.0 test\n> jest --ci\n")
    failed = []
    if failing:
        for _ in range(rng.randint(1, 2)):
            suite = f"src/{rng.choice(rt.MODULES)}/{rt._camel(rng)}.test.ts"
            case = f"{rt._camel(rng)} › {rt._third_person(rng.choice(rt.VERBS))} the {rng.choice(rt.NOUNS)}"
            line = rng.randint(10, 200)
            failed.append((suite, (
                f"FAIL {suite}\n  ● {case}\n\n"
                "    expect(received).toEqual(expected) // deep equality\n\n"
                f"    Expected: {rng.randint(0, 99)}\n    Received: {rng.randint(100, 199)}\n\n"
                f"    > {line} |     expect({rt._camel(rng)}(input)).toEqual(expected);\n"
                "         |                                ^\n\n"
                f"      at Object.<anonymous> ({suite}:{line}:32)"
            )))
    failed_note = f"{len(failed)} failed, " if failed else ""
    tail = _charge(budget, (
        "".join(block + "\n\n" for _, block in failed)
        + f"Test Suites: {failed_note}00 passed, 00 total\n"
        + f"Tests:       {failed_note}000 passed, 000 total\n"
        + f"Snapshots:   0 total\nTime:        {rng.uniform(1, 60):.3f} s\nRan all test suites."
    ))
    body = budget.fill("jest", rng)
    passed = sum(e.startswith("  ✓") for e in body)
    suites = sum(e.startswith("PASS ") for e in body)
    tail = (tail.replace("00 passed, 00 total", f"{suites} passed, {suites + len(failed)} total", 1)
                .replace("000 passed, 000 total", f"{passed} passed, {passed + len(failed)} total", 1))
    return (1 if failed else 0), _lines([head, *body, tail])


def _log(budget: rt.Budget, rng: random.Random, cwd: str, failing: bool) -> tuple[int, str]:
    body = budget.fill("log", rng)
    stamps = rt.timestamps(rng, len(body))
    return 0, "\n".join(f"{ts} {entry}" for ts, entry in zip(stamps, body, strict=True))


def _build(budget: rt.Budget, rng: random.Random, cwd: str, failing: bool) -> tuple[int, str]:
    head = _charge(budget, f"make: Entering directory '{cwd}'\nmkdir -p build")
    if failing:
        mod, noun = rng.choice(rt.MODULES), rng.choice(rt.NOUNS)
        line = rng.randint(10, 900)
        tail = _charge(budget, (
            f"src/{mod}/{noun}.c:{line}:5: error: implicit declaration of function '{rt._name(rng)}' "
            "[-Wimplicit-function-declaration]\n"
            f"make: *** [Makefile:{rng.randint(20, 80)}: build/{mod}/{noun}.o] Error 1\n"
            f"make: Leaving directory '{cwd}'"
        ))
    else:
        tail = _charge(budget, f"gcc -o build/app build/*/*.o -lm -lpthread\nmake: Leaving directory '{cwd}'")
    return (2 if failing else 0), _lines([head, *budget.fill("build", rng), tail])


def _plain(kind: str):
    def run(budget: rt.Budget, rng: random.Random, cwd: str, failing: bool) -> tuple[int, str]:
        return 0, "\n".join(budget.fill(kind, rng))

    return run


_SHELL_OUTPUTS = {
    "pytest": _pytest, "cargo": _cargo, "jest": _jest, "log": _log, "build": _build,
    "listing": _plain("listing"), "diff": _plain("diff"),
}
FAILING_FLAVORS = frozenset({"pytest", "cargo", "jest", "build"})


@dataclass(frozen=True)
class ShellTool(_FunctionTool):
    """`shell`: runs a command and returns build/test/log output (spec of the output: Codex's exec summary)."""

    description = (
        "Runs a shell command and returns its output. Use it to build, run tests, read logs and inspect files."
    )
    parameters = {
        "command": {"type": "array", "items": {"type": "string"}, "description": "The command to execute"},
        "workdir": {"type": "string", "description": "The working directory to execute the command in"},
        "timeout_ms": {"type": "number", "description": "The timeout for the command in milliseconds"},
    }
    required = ("command",)

    cwd: str
    output: SizeDistribution
    failure_rate: float = 0.3
    default_flavor: str = "build"
    counter_name: str = DEFAULT_ENCODING
    name: str = field(default="shell", init=False)

    def run(self, arguments: Mapping[str, Any], *, rng: random.Random) -> ToolResult:
        command = arguments.get("command")
        if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
            # ["bash", "-lc", "<script>"] is how Codex wraps commands; the script is what matters.
            text = command[-1] if command[:2] in (["bash", "-lc"], ["bash", "-c"], ["sh", "-c"]) else shlex.join(command)
        elif isinstance(command, str) and command.strip():
            text = command
        else:
            raise ToolArgumentError("missing argument 'command' (a list of strings)")
        flavor = shell_flavor(text, self.default_flavor)
        failing = flavor in FAILING_FLAVORS and rng.random() < self.failure_rate
        budget = rt.Budget(self.output.sample(rng), self.counter_name)
        workdir = arguments.get("workdir")
        cwd = workdir if isinstance(workdir, str) and workdir.strip() else self.cwd
        exit_code, body = _SHELL_OUTPUTS[flavor](budget, rng, cwd, failing)
        wall = f"{rng.uniform(0.1, 120):.1f}"
        return ToolResult(f"Exit code: {exit_code}\nWall time: {wall} seconds\nOutput:\n{body}")


# --- read_file, search, apply_patch, new_context ----------------------------------------------------------------------

CODE_KINDS = {
    ".py": "python", ".rs": "rust", ".ts": "typescript", ".tsx": "typescript", ".js": "typescript",
    ".jsx": "typescript", ".go": "typescript", ".java": "typescript", ".c": "typescript", ".h": "typescript",
}
CODE_HEADERS = {
    "python": '"""{title}."""\n\nfrom __future__ import annotations\n\nimport logging\nfrom decimal import Decimal\n'
              "from typing import Any\n\nlogger = logging.getLogger(__name__)\n",
    "rust": "//! {title}.\n\nuse std::collections::HashMap;\n\nuse crate::error::Error;\n",
    "typescript": "// {title}.\nimport {{ Row, Payload }} from './types';\n",
    "text": "# {title}\n",
}


@dataclass(frozen=True)
class ReadFileTool(_FunctionTool):
    """`read_file`: the (plausible) contents of a path; the same path always reads the same for one tool seed."""

    description = "Reads a file from the workspace and returns its contents."
    parameters = {"path": {"type": "string", "description": "Path of the file, relative to the working directory"}}
    required = ("path",)

    seed: int | str
    output: SizeDistribution
    counter_name: str = DEFAULT_ENCODING
    name: str = field(default="read_file", init=False)

    def run(self, arguments: Mapping[str, Any], *, rng: random.Random) -> ToolResult:
        path = _require_str(arguments, "path").strip()
        file_rng = call_rng(self.seed, "read_file", path)
        suffix = ("." + path.rsplit(".", 1)[1]) if "." in path.rsplit("/", 1)[-1] else ""
        kind = CODE_KINDS.get(suffix.lower(), "text")
        budget = rt.Budget(self.output.sample(file_rng), self.counter_name)
        stem = path.rsplit("/", 1)[-1].split(".")[0].replace("_", " ")
        header = budget.spend(CODE_HEADERS[kind].format(title=f"{stem.capitalize()} helpers") + "\n")
        return ToolResult(header + "\n".join(budget.fill(kind, file_rng)))


def _query_word(pattern: str) -> str:
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", pattern)
    return max(words, key=len) if words else pattern.strip()


@dataclass(frozen=True)
class SearchTool(_FunctionTool):
    """`search`: grep-style `path:line:text` hits for a pattern."""

    description = "Searches the workspace for a regular expression and returns matching lines as path:line:text."
    parameters = {
        "pattern": {"type": "string", "description": "Regular expression to search for"},
        "path": {"type": "string", "description": "Directory or file to search in (default: the workspace)"},
    }
    required = ("pattern",)

    output: SizeDistribution
    counter_name: str = DEFAULT_ENCODING
    name: str = field(default="search", init=False)

    def run(self, arguments: Mapping[str, Any], *, rng: random.Random) -> ToolResult:
        word = _query_word(_require_str(arguments, "pattern"))
        budget = rt.Budget(self.output.sample(rng), self.counter_name)
        extra = max(0, budget.cost(word) - budget.cost("x"))
        hits = budget.fill("grep", rng, extra_cost=extra)
        if not hits:
            return ToolResult("No matches found.")
        return ToolResult("\n".join(h.replace("{q}", word) for h in hits))


PATCH_OPS = {"*** Add File: ": "A", "*** Update File: ": "M", "*** Delete File: ": "D"}


@dataclass(frozen=True)
class ApplyPatchTool(_FunctionTool):
    """`apply_patch`: checks the patch envelope and reports the files it touched, as Codex's tool does."""

    description = (
        "Applies a patch to files in the workspace. The patch starts with '*** Begin Patch', ends with "
        "'*** End Patch', and has '*** Add File: ', '*** Update File: ' or '*** Delete File: ' sections."
    )
    parameters = {"input": {"type": "string", "description": "The entire contents of the patch"}}
    required = ("input",)

    failure_rate: float = 0.1
    name: str = field(default="apply_patch", init=False)

    def run(self, arguments: Mapping[str, Any], *, rng: random.Random) -> ToolResult:
        patch = _require_str(arguments, "input")
        lines = patch.strip().splitlines()
        if lines[0].strip() != "*** Begin Patch":
            return ToolResult("apply_patch verification failed: invalid patch: The first line of the patch must be "
                              "'*** Begin Patch'")
        if lines[-1].strip() != "*** End Patch":
            return ToolResult("apply_patch verification failed: invalid patch: The last line of the patch must be "
                              "'*** End Patch'")
        changes = [
            (mark, line[len(prefix):].strip())
            for line in lines for prefix, mark in PATCH_OPS.items() if line.startswith(prefix)
        ]
        if not changes:
            return ToolResult("apply_patch verification failed: invalid patch: no file sections")
        if rng.random() < self.failure_rate:
            path = next((p for m, p in changes if m == "M"), changes[0][1])
            context = next((line[1:] for line in lines if line.startswith("-")), "")
            return ToolResult(f"apply_patch verification failed: Failed to find expected lines in {path}:\n{context}")
        listing = "".join(f"{mark} {path}\n" for mark, path in changes)
        return ToolResult(f"Success. Updated the following files:\n{listing}")


NEW_CONTEXT_ACK = (
    "A new context window was requested. It starts after this tool call: the conversation so far will be replaced "
    "by the initial context, so write down anything you still need before continuing."
)


@dataclass(frozen=True)
class NewContextTool(_FunctionTool):
    """`new_context` (token-budget mode, spec §4.4): the call requests a new context window."""

    description = (
        "Starts a new context window. Call it when the current window is nearly full and your progress is "
        "saved; the next request begins from the initial context only."
    )

    name: str = field(default="new_context", init=False)

    def run(self, arguments: Mapping[str, Any], *, rng: random.Random) -> ToolResult:
        return ToolResult(NEW_CONTEXT_ACK, new_window_requested=True)


TOOL_NAMES = ("shell", "read_file", "search", "apply_patch", "new_context")
TOOL_OPTIONS = {
    "shell": {"output", "failure_rate", "default_flavor"},
    "read_file": {"output"},
    "search": {"output"},
    "apply_patch": {"failure_rate"},
    "new_context": set(),
}
DEFAULT_OUTPUTS = {
    "shell": SizeDistribution(LogNormal(median=600, sigma=1.0, cap=20_000, floor=20)),
    "read_file": SizeDistribution(LogNormal(median=1_500, sigma=0.7, cap=12_000, floor=50)),
    "search": SizeDistribution(LogNormal(median=300, sigma=0.9, cap=4_000, floor=10)),
}


def parse_tool_settings(name: str, data: Any, field_path: str) -> ToolSettings:
    """Validate one `[tools.<name>]` table; raises SpecError naming the field."""
    if name not in TOOL_NAMES:
        raise SpecError(field_path, f"unknown tool {name!r}; choose from {', '.join(TOOL_NAMES)}")
    if not isinstance(data, Mapping):
        raise SpecError(field_path, f"must be a table, got {data!r}")
    extra = sorted(set(data) - TOOL_OPTIONS[name])
    if extra:
        allowed = ", ".join(sorted(TOOL_OPTIONS[name])) or "none"
        raise SpecError(f"{field_path}.{extra[0]}", f"is not an option of {name!r} (options: {allowed})")
    output = parse_distribution(data["output"], f"{field_path}.output") if "output" in data else None
    rate = data.get("failure_rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1):
        raise SpecError(f"{field_path}.failure_rate", f"must be a number in 0..1, got {rate!r}")
    flavor = data.get("default_flavor")
    if flavor is not None and flavor not in SHELL_FLAVORS:
        raise SpecError(f"{field_path}.default_flavor", f"must be one of {', '.join(SHELL_FLAVORS)}, got {flavor!r}")
    return ToolSettings(output=output, failure_rate=None if rate is None else float(rate), default_flavor=flavor)


def build_tools(
    settings: Mapping[str, ToolSettings], *, seed: int | str, cwd: str, counter_name: str = DEFAULT_ENCODING
) -> dict[str, Any]:
    """The tool objects a session offers, by name, in the scenario's order."""
    tools: dict[str, Any] = {}
    for name, s in settings.items():
        output = s.output or DEFAULT_OUTPUTS.get(name)
        if name == "shell":
            tools[name] = ShellTool(
                cwd=cwd, output=output, counter_name=counter_name,
                failure_rate=0.3 if s.failure_rate is None else s.failure_rate,
                default_flavor=s.default_flavor or "build",
            )
        elif name == "read_file":
            tools[name] = ReadFileTool(seed=seed, output=output, counter_name=counter_name)
        elif name == "search":
            tools[name] = SearchTool(output=output, counter_name=counter_name)
        elif name == "apply_patch":
            tools[name] = ApplyPatchTool(failure_rate=0.1 if s.failure_rate is None else s.failure_rate)
        elif name == "new_context":
            tools[name] = NewContextTool()
        else:
            raise ValueError(f"unknown tool {name!r}")
    return tools


def tool_specs(tools: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request's `tools` array (spec §13)."""
    return [tool.spec() for tool in tools.values()]


# --- dispatch -----------------------------------------------------------------------------------------------------------

def function_call_output(call_id: str, output: str) -> Item:
    """A `function_call_output` item answering the call `call_id` (spec §1.1)."""
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def dispatch_tool_call(item: Item, tools: Mapping[str, Any], rng: random.Random) -> tuple[Item, bool]:
    """Run the tool a model `function_call` names and return (its function_call_output, new window requested).

    What the model got wrong (an unknown tool, arguments that are not a JSON object, missing arguments) comes back
    as the output text, as Codex answers it, so the model can correct itself; only a non-call item raises.
    """
    if item.get("type") != "function_call" or not isinstance(item.get("call_id"), str):
        raise ValueError(f"expected a function_call item with a call_id, got {item.get('type')!r}")
    call_id, name = item["call_id"], item.get("name")
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return function_call_output(call_id, f"unsupported call: {name}"), False
    raw = item.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return function_call_output(call_id, f"failed to parse function arguments: {exc}"), False
    if not isinstance(arguments, dict):
        return function_call_output(call_id, "failed to parse function arguments: expected a JSON object"), False
    try:
        result = tool.run(arguments, rng=rng)
    except ToolArgumentError as exc:
        return function_call_output(call_id, f"{name}: invalid arguments: {exc}"), False
    return function_call_output(call_id, result.output), result.new_window_requested


def custom_tool_call_output(call_id: str, output: str) -> Item:
    """A `custom_tool_call_output` item answering the freeform call `call_id` (spec §1.1)."""
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def tool_search_output(call_id: str, tools: list[dict[str, Any]]) -> Item:
    """A client-executed `tool_search_output`: the specs of the tools that match the search (spec §1.1)."""
    return {"type": "tool_search_output", "call_id": call_id, "status": "completed", "execution": "client",
            "tools": tools}


def _run_named(tool: Any, name: str, arguments: Mapping[str, Any], rng: random.Random) -> tuple[str, bool]:
    try:
        result = tool.run(arguments, rng=rng)
    except ToolArgumentError as exc:
        return f"{name}: invalid arguments: {exc}", False
    return result.output, result.new_window_requested


def _search_words(arguments: Any) -> list[str]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments.lower().split()
    query = arguments.get("query") if isinstance(arguments, dict) else None
    return query.lower().split() if isinstance(query, str) else []


def answer_tool_call(item: Item, tools: Mapping[str, Any], rng: random.Random) -> tuple[Item, bool]:
    """Answer any client-executed call kind in its own output shape (spec §2.4 item 2, §1.1), and whether the
    tool asked for a new context window:

    - `function_call` → `function_call_output` (`dispatch_tool_call`);
    - `custom_tool_call` → `custom_tool_call_output`, the tool named by `name` run on the freeform `input`;
    - `local_shell_call` → `function_call_output` for `call_id` (or the item's `id`), the `action.command` run on
      the `shell` tool, as Codex answers it;
    - client `tool_search_call` → `tool_search_output` listing the specs of the tools whose name or description
      holds a word of `arguments.query` (every tool when the query is empty).
    """
    kind = item.get("type")
    call_id = output_call_id(item)
    if kind == "function_call":
        if not call_id:
            return function_call_output("", "unsupported call: a function_call without call_id"), False
        return dispatch_tool_call(item, tools, rng)
    if kind == "custom_tool_call":
        name = item.get("name")
        tool = tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return custom_tool_call_output(call_id, f"unsupported custom tool call: {name}"), False
        output, new_window = _run_named(tool, name, {"input": item.get("input") or ""}, rng)
        return custom_tool_call_output(call_id, output), new_window
    if kind == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        shell = tools.get("shell")
        if shell is None:
            return function_call_output(call_id, "unsupported call: local_shell"), False
        arguments = {k: action[k] for k in ("command", "workdir", "timeout_ms") if k in action}
        output, new_window = _run_named(shell, "local_shell", arguments, rng)
        return function_call_output(call_id, output), new_window
    if kind == "tool_search_call":
        words = _search_words(item.get("arguments"))
        specs = [tool.spec() for tool in tools.values()]
        found = [s for s in specs if not words or any(
            w in f"{s.get('name', '')} {s.get('description', '')}".lower() for w in words)]
        return tool_search_output(call_id, found), False
    raise ValueError(f"{kind!r} is not a call the client executes")
