"""A labelled set for the retention score: sessions with planted facts, the windows a compaction could leave, and
the ground truth of each planted fact (held or lost in that window), written by hand per rendering.

Each planted fact is planted by real item shapes (Codex 0.169 `exec_command` outputs with "Process exited with code
N", `shell` with "Exit code: N", `local_shell_call` with the JSON metadata, a custom-tool `apply_patch`, files read
through `sed`/`cat`, errors without the word "Error", values the agent used later, details past character 200) and
rendered in the new window one of several ways: the item kept verbatim, a summary line that paraphrases it, a
summary line clipped at 200 characters, a line with the wrong exit status or a wrong id, or not at all. The truth
of each rendering is fixed here, not computed by the scorer. `sessions(seed)` builds a deterministic set.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from compaction_app.engine.items import SUMMARY_PREFIX, user_message

AGENTS = user_message(
    "# AGENTS.md instructions for /repo\n<INSTRUCTIONS>\n- Run the tests with pytest before you commit; fix what "
    "fails.\n- Keep functions small and typed; never commit secrets.\n- Money is handled in src/pay; the ledger "
    "lives in src/pay/ledger.py.\n</INSTRUCTIONS>")


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def fcall(call_id: str, name: str, **args) -> dict:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}


def fout(call_id: str, text: str) -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def exec_out(code: int, body: str) -> str:
    """Codex 0.169's exec_command output."""
    return f"Chunk ID: 3afdf5\nWall time: 0.4120 seconds\nProcess exited with code {code}\nOriginal token count: " \
           f"{len(body) // 4}\nOutput:\n{body}\n"


def shell_out(code: int, body: str) -> str:
    return f"Exit code: {code}\nWall time: 0.4 seconds\nOutput:\n{body}"


@dataclass
class Planted:
    """One planted fact: `kind` as the scorer names it, `tag` a string only this fact's text holds, the items
    that plant it, and its renderings: (label, truth_held, items_in_window, summary_lines)."""

    kind: str
    tag: str
    items: list[dict]
    renderings: list[tuple[str, bool, list[dict], list[str]]]


@dataclass
class Case:
    name: str
    before: list[dict]
    after: list[dict]
    truth: dict[tuple[str, str], bool] = field(default_factory=dict)  # (kind, tag) -> held
    labels: dict[tuple[str, str], str] = field(default_factory=dict)


def _planters(n: int, rng: random.Random) -> list[Planted]:
    """Every fact template, instantiated with ids unique to this session (n)."""
    order, acct, port = f"ORD-{4800 + n}", f"ACC-{99000 + n}", str(18000 + n)
    mod = f"src/pay/m{n}/refund.py"
    test = f"tests/pay/test_refund_{n}.py"
    out: list[Planted] = []
    # 1. A goal with an id, and its constraint sentence.
    goal = f"Add a refund endpoint for order {order} that answers HTTP 202. Amounts must always be Decimal, never float."
    gmsg = user_message(goal)
    out.append(Planted("goal", order, [gmsg], [
        ("verbatim", True, [gmsg], []),
        ("paraphrase", True, [], [f"- The user wants a refund endpoint for {order}, answering HTTP 202."]),
        ("wrong id", False, [], [f"- The user wants a refund endpoint for ORD-{4700 + n}, answering HTTP 202."]),
        ("dropped", False, [], []),
    ]))
    out.append(Planted("constraint", "never float", [], [
        ("paraphrase", True, [], ["- Constraint: amounts always in Decimal, never float."]),
        ("dropped", False, [], ["- Use whatever numeric type is convenient."]),
    ]))
    # 2. A failing test run through Codex 0.169's exec_command.
    c1 = f"c{n}a"
    cmd = f"pytest -q {test}"
    pair = [fcall(c1, "exec_command", cmd=cmd),
            fout(c1, exec_out(1, f"F.\n{test}::test_partial - assert Decimal('14.28') == Decimal('14.29')\n"
                                 "1 failed, 1 passed in 0.31s"))]
    out.append(Planted("command", test, pair, [
        ("verbatim pair", True, pair, []),
        ("paraphrase exit", True, [], [f"- `{cmd}` exited with 1 (one test failing)."]),
        ("paraphrase failed", True, [], [f"- Ran {cmd}: it failed."]),
        ("command without status", False, [], [f"- Ran `{cmd}`."]),
        ("wrong status", False, [], [f"- `{cmd}` passed (exit 0)."]),
        ("dropped", False, [], []),
    ]))
    out.append(Planted("error", "14.29", [], [
        ("paraphrase", True, [], [f"- {test}::test_partial asserts Decimal 14.28 == Decimal 14.29 and fails."]),
        ("dropped", False, [], ["- One test was failing on a rounding detail."]),
    ]))
    # 3. An error line without the word "Error", detail past character 200.
    c2 = f"c{n}b"
    filler = "while reconciling the nightly settlement batch against the provider statement the totals did not " \
             "agree and the run stopped before writing anything to the ledger so nothing was committed and "
    long_line = f"reconcile: {filler}mismatch for account {acct} at offset {70000 + n}"
    lpair = [fcall(c2, "shell", command=["bash", "-lc", "python -m pay.reconcile --dry-run"]),
             fout(c2, shell_out(2, f"loading statement\n{long_line}"))]
    out.append(Planted("error", acct, lpair, [
        ("verbatim pair", True, lpair, []),
        ("paraphrase", True, [], [f"- Reconcile reported a mismatch for account {acct} at offset {70000 + n}."]),
        ("clipped at 200", False, [], [f"- {long_line[:200]}…"]),
        ("dropped", False, [], []),
    ]))
    # 4. A file read through a shell command (local_shell_call, JSON metadata exit status).
    c3 = f"c{n}c"
    ledger = f"src/pay/ledger_{n}.py"
    lread = [{"type": "local_shell_call", "call_id": c3, "status": "completed",
              "action": {"type": "exec", "command": ["bash", "-lc", f"sed -n 1,80p {ledger}"]}},
             fout(c3, json.dumps({"output": "def post(entry): ...", "metadata": {"exit_code": 0,
                                                                                 "duration_seconds": 0.1}}))]
    out.append(Planted("file_read", ledger, lread, [
        ("verbatim pair", True, lread, []),
        ("summary list", True, [], [f"- Files read: `{ledger}`, README.md"]),
        ("other file", False, [], ["- Files read: README.md"]),
        ("dropped", False, [], []),
    ]))
    # 5. A file changed through a custom tool call (freeform apply_patch).
    c4 = f"c{n}d"
    patch = [{"type": "custom_tool_call", "call_id": c4, "name": "apply_patch",
              "input": f"*** Begin Patch\n*** Add File: {mod}\n+def refund(order): ...\n*** End Patch\n"},
             {"type": "custom_tool_call_output", "call_id": c4, "output": f"Success. Updated the following files:\nA {mod}"}]
    out.append(Planted("file_changed", mod, patch, [
        ("verbatim pair", True, patch, []),
        ("summary", True, [], [f"- Created {mod} with the refund handler."]),
        ("dropped", False, [], []),
    ]))
    # 6. A plain value from a command's output that the agent used later.
    c5 = f"c{n}e"
    vpair = [fcall(c5, "exec_command", cmd="docker compose port api 8000"),
             fout(c5, exec_out(0, f"0.0.0.0:{port}")),
             assistant(f"The API listens on {port}; I will point the smoke test there.")]
    out.append(Planted("value", port, vpair, [
        ("verbatim", True, vpair, []),
        ("summary", True, [], [f"- The API is published on localhost port {port}."]),
        ("dropped", False, [], []),
    ]))
    # 7. A decision and a next step.
    dec = assistant(f"The root cause is that the cache key ignores tenant_{n}, so I will add it to the key.\n"
                    f"Next: backfill the refunds table with migration 0{400 + n}")
    out.append(Planted("decision", f"tenant_{n}", [dec], [
        ("verbatim", True, [dec], []),
        ("paraphrase", True, [], [f"- Root cause: the cache key ignored tenant_{n}; decided to add it to the key."]),
        ("dropped", False, [], []),
    ]))
    out.append(Planted("next_step", f"0{400 + n}", [], [
        ("paraphrase", True, [], [f"- Next step: backfill the refunds table (migration 0{400 + n})."]),
        ("wrong", False, [], [f"- Next step: backfill the refunds table (migration 0{500 + n})."]),
        ("dropped", False, [], []),
    ]))
    rng.shuffle(out)
    return out


def build(n: int, rng: random.Random) -> Case:
    planted = _planters(n, rng)
    before = [AGENTS]
    # Items of facts that ride on another fact's items (constraint in the goal, error in the test run, next step
    # in the decision) have no items of their own.
    for p in planted:
        before += p.items
    # Keep the plant order sane: the goal first (the user speaks before the tools run).
    goal = next(p for p in planted if p.kind == "goal")
    before.remove(goal.items[0])
    before.insert(1, goal.items[0])
    kept_items: list[dict] = []
    lines: list[str] = []
    case = Case(name=f"session-{n}", before=before, after=[])
    for p in planted:
        label, held, items, summary = rng.choice(p.renderings)
        case.truth[(p.kind, p.tag)] = held
        case.labels[(p.kind, p.tag)] = label
        kept_items += [i for i in items if i not in kept_items]
        lines += summary
    rng.shuffle(lines)
    summary_text = "\n".join(["Summary of the work so far:", *lines]) if lines else "Summary: work in progress."
    kept = [i for i in before if i in kept_items]
    case.after = [AGENTS, *kept, user_message(f"{SUMMARY_PREFIX}\n{summary_text}")]
    # A fact kept only by riding items: the goal's constraint rides on the goal message, the test's error line on
    # its output, the next step on the decision message; their truth follows those items when they stayed.
    riders = {("constraint", "never float"): ("goal", goal.tag), ("next_step", f"0{400 + n}"): ("decision", f"tenant_{n}")}
    test_tag = next(p.tag for p in planted if p.kind == "command")
    riders[("error", "14.29")] = ("command", test_tag)
    for rider, host in riders.items():
        if case.labels[host] in ("verbatim", "verbatim pair"):
            case.truth[rider] = True
            case.labels[rider] += " (host item kept)"
    return case


def sessions(seed: int = 32, count: int = 60) -> list[Case]:
    rng = random.Random(seed)
    return [build(n, rng) for n in range(1, count + 1)]


def lost_called_kept(cases: list[Case], check) -> tuple[int, int]:
    """(lost planted facts a check called kept, lost planted facts): `check(before, after)` gives a score whose
    verdicts are matched to each planted fact by kind and tag; a fact it never extracted is not called kept."""
    called_kept = lost = 0
    for case in cases:
        verdicts = check(case.before, case.after).verdicts
        for (kind, tag), held in case.truth.items():
            if held:
                continue
            lost += 1
            mine = [v for v in verdicts if v.fact.kind.value == kind and tag.lower() in v.fact.text.lower()]
            called_kept += bool(mine) and all(v.kept for v in mine)
    return called_kept, lost
