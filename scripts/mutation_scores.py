"""Print mutmut's results per room of [tool.mutmut] only_mutate: killed / all judged, and the survivors by name
(`.venv/bin/mutmut show NAME` prints one's diff). Run by scripts/nightly after `mutmut run`."""

from __future__ import annotations

import fnmatch
import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parents[1]
KILLED = {"killed", "timeout", "segfault", "caught by type check"}


def main() -> int:
    rooms = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["only_mutate"]
    counts: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        source = meta.relative_to(ROOT / "mutants").as_posix().removesuffix(".meta")
        room = next((pattern for pattern in rooms if fnmatch.fnmatch(source, pattern)), None)
        if room is None:
            continue
        for name, exit_code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items():
            counts[room][status_by_exit_code[exit_code]].append(name)
    if not counts:
        print("no mutmut results under mutants/: run `.venv/bin/mutmut run` first", file=sys.stderr)
        return 1
    for room in rooms:
        by_status = counts.get(room, {})
        killed = sum(len(names) for status, names in by_status.items() if status in KILLED)
        judged = killed + len(by_status.get("survived", []))
        score = f"{100 * killed / judged:.0f}%" if judged else "n/a"
        other = {status: len(names) for status, names in by_status.items()
                 if status not in KILLED and status != "survived"}
        print(f"{room}: {killed}/{judged} killed ({score}){f', not judged: {other}' if other else ''}")
        for name in sorted(by_status.get("survived", [])):
            print(f"    survived: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
