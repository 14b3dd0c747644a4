"""The rooms of the nightly mutation run (scripts/nightly mutation), each mutated against only its own tests.

mutmut reads one [tool.mutmut] table from the pyproject.toml of the directory it runs in, so each room runs in a
copy of the tree of its own (var/mutation/<room>/, kept between runs so a rerun retries only what changed) whose
pyproject.toml names that room's files and tests. The rooms are [tool.compactweb.mutation.rooms] of pyproject.toml.

    python scripts/mutation_rooms.py list              the room names
    python scripts/mutation_rooms.py prepare ROOM      copy the tree to var/mutation/ROOM, write its config and
                                                       migrate the database each mutant's tests start from a copy of
    python scripts/mutation_rooms.py functions ROOM    the mutant names the room is restricted to (its `functions`,
                                                       mutmut's name patterns), one a line; none: every mutant of
                                                       its files
    python scripts/mutation_rooms.py scores ROOM       killed / judged and the survivors, from its mutants/
    python scripts/mutation_rooms.py sample ROOM N SEED
                                                       generate the room's mutants (in its prepared copy) and
                                                       pick N of them uniformly at random with SEED; writes the
                                                       names to var/mutation/ROOM/sample.txt and prints them
    python scripts/mutation_rooms.py scores ROOM --sample
                                                       the same, for the sampled mutants only, with the score's
                                                       95% interval (Wilson)

A sample stands for a room too large to run whole on a shared machine: mutmut runs the cheapest mutants first, so
a run stopped part way judges the mutants the fewest tests reach, not a random part of the room. A seeded uniform
sample, drawn from the room's sorted mutant names, is the same sample on every machine for the same source, so a
survivor's new test can be checked against the same draw before and after.

A room may name `functions` beside its files: patterns of mutant names (`gateway_app.proxy.x__lookup*`), when only
some functions of a large file are the room's rules (the gateway's key lookup lives in proxy.py, beside its HTTP
plumbing). `scripts/nightly mutation` passes them to `mutmut run`, and the scores count only those mutants.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import random
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KILLED = {"killed", "timeout", "segfault", "caught by type check"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def rooms() -> dict[str, dict]:
    return _pyproject()["tool"]["compactweb"]["mutation"]["rooms"]


def room_dir(room: str) -> Path:
    return ROOT / "var" / "mutation" / room


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(value) for value in values) + "]"


def prepare(room: str) -> Path:
    spec = rooms()[room]
    target = room_dir(room)
    target.mkdir(parents=True, exist_ok=True)
    # The tree as git sees it (tracked and new files, not ignored ones): no .venv, no node_modules, no results.
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout
    subprocess.run(["rsync", "-a", "--delete-missing-args", "--from0", "--files-from=-", "./", f"{target}/"],
                   cwd=ROOT, input=files, check=True)
    base = _pyproject()["tool"]["mutmut"]
    config = (ROOT / "pyproject.toml").read_text().split("[tool.mutmut]")[0]
    config += "\n".join([
        "[tool.mutmut]",
        f"source_paths = {_toml_list(base['source_paths'])}",
        f"only_mutate = {_toml_list(spec['mutate'])}",
        f"also_copy = {_toml_list(base['also_copy'])}",
        f"pytest_add_cli_args_test_selection = {_toml_list(spec['tests'])}",
        f"process_isolation = {json.dumps(base['process_isolation'])}",
        f"timeout_constant = {base['timeout_constant']}",
        # the copy is not a git repository of its own: mutmut's git look-ups would read the outer tree's
        "use_git_change_detection = false",
        "",
    ])
    (target / "pyproject.toml").write_text(config)
    _migrate_template(target)
    return target


def template_db(room: str) -> Path:
    return room_dir(room) / "migrated.sqlite3"


def _migrate_template(target: Path) -> None:
    """Migrate the SQLite database every mutant's test run copies (tests/conftest.py, COMPACTWEB_MUTATION_TEMPLATE_DB)
    from the copy's own, unmutated migrations."""
    template = target / "migrated.sqlite3"
    template.unlink(missing_ok=True)
    env = {name: value for name, value in os.environ.items()
           if name not in {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "MUTANT_UNDER_TEST"}}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=target, check=True,
                   env={**env, "SQLITE_PATH": str(template), "COMPACTWEB_VAR_DIR": str(target / "var")})


def functions(room: str) -> list[str]:
    return list(rooms()[room].get("functions", []))


def _in_room(name: str, patterns: list[str]) -> bool:
    return not patterns or any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def sample_names(population: list[str], size: int, seed: int) -> list[str]:
    """`size` names drawn uniformly without replacement from `population`, the same for the same seed whatever
    order the names were found in (they are sorted first: the walk of mutants/ is the file system's order)."""
    names = sorted(set(population))
    return sorted(random.Random(seed).sample(names, min(size, len(names))))


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% for z = 1.96): unlike the normal approximation it stays in
    [0, 1] and is not a zero-width interval when every sampled mutant is killed."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def sample_file(room: str) -> Path:
    return room_dir(room) / "sample.txt"


def _room_results(room: str) -> dict[str, int | None]:
    """Every mutant of the room (its files, its `functions`) with its exit code, None when not yet run."""
    spec = rooms()[room]
    patterns = functions(room)
    mutants = room_dir(room) / "mutants"
    results: dict[str, int | None] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        source = meta.relative_to(mutants).as_posix().removesuffix(".meta")
        if not any(fnmatch.fnmatch(source, pattern) for pattern in spec["mutate"]):
            continue
        for name, exit_code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items():
            if _in_room(name, patterns):
                results[name] = exit_code
    return results


def generate(room: str) -> None:
    """Write the room's mutants under its copy's mutants/ without running any (what `mutmut run` does first),
    so that a sample can be drawn from their names."""
    code = ("from mutmut.__main__ import create_mutants, copy_src_dir, copy_also_copy_files, setup_source_paths, "
            "set_mutant_under_test\n"
            "import os\n"
            "set_mutant_under_test('mutant_generation')\n"
            "os.makedirs('mutants', exist_ok=True)\n"
            "copy_src_dir(); copy_also_copy_files(); setup_source_paths()\n"
            "create_mutants(2)\n")
    subprocess.run([sys.executable, "-c", code], cwd=room_dir(room), check=True, stdout=subprocess.DEVNULL)


def sample(room: str, size: int, seed: int) -> list[str]:
    generate(room)
    names = sample_names(list(_room_results(room)), size, seed)
    sample_file(room).write_text("".join(f"{name}\n" for name in names))
    return names


def scores(room: str, *, sampled: bool = False) -> int:
    spec = rooms()[room]
    from mutmut.stats import status_by_exit_code

    results = _room_results(room)
    population = len(results)
    if sampled:
        names = sample_file(room).read_text().split() if sample_file(room).exists() else []
        results = {name: results.get(name) for name in names}
    by_status: dict[str, list[str]] = defaultdict(list)
    for name, exit_code in results.items():
        by_status[status_by_exit_code[exit_code]].append(name)
    if not by_status:
        print(f"{room}: no results under {(room_dir(room) / 'mutants').relative_to(ROOT)}", file=sys.stderr)
        return 1
    killed = sum(len(names) for status, names in by_status.items() if status in KILLED)
    # A mutant no test reaches is not killed either: it counts as a survivor.
    survived = sorted(by_status.get("survived", []) + by_status.get("no tests", []))
    equivalent: dict[str, str] = spec.get("equivalent", {})
    judged = killed + len(survived) - len(equivalent.keys() & set(survived))
    score = f"{100 * killed / judged:.0f}%" if judged else "n/a"
    other = {status: len(names) for status, names in by_status.items()
             if status not in KILLED | {"survived", "no tests"}}
    # Mutants only PostgreSQL runs survive this embedded run; the room lists the PostgreSQL test that kills each.
    postgresql_only: dict[str, str] = spec.get("postgresql_only", {})
    on_postgresql = len(postgresql_only.keys() & set(survived))
    with_postgresql = (f"; {100 * (killed + on_postgresql) / judged:.0f}% with the {on_postgresql} that only the "
                       "PostgreSQL pass runs, killed there" if on_postgresql and judged else "")
    print(f"{room}: {killed}/{judged} non-equivalent mutants killed ({score}{with_postgresql})"
          f"{f', not judged: {other}' if other else ''}")
    if sampled:
        low, high = wilson_interval(killed, judged)
        equivalents = len(equivalent.keys() & set(survived))
        print(f"    a sample of {len(results)} of the room's {population} mutants: killed {killed} (timeouts "
              f"{len(by_status.get('timeout', []))}), survived {len(survived) - equivalents}, equivalent "
              f"{equivalents} (left out of the score); 95% interval (Wilson) {100 * low:.0f}% to {100 * high:.0f}%")
    for name in survived:
        if name in equivalent:
            print(f"    equivalent: {name}: {equivalent[name]}")
        elif name in postgresql_only:
            print(f"    PostgreSQL only: {name}: killed there by {postgresql_only[name]}")
        else:
            print(f"    {'no test reaches' if name in by_status.get('no tests', []) else 'survived'}: {name}")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 1 and argv[0] == "list":
        print(" ".join(rooms()))
        return 0
    if len(argv) == 4 and argv[0] == "sample" and argv[1] in rooms():
        print("\n".join(sample(argv[1], int(argv[2]), int(argv[3]))))
        return 0
    if len(argv) == 3 and argv[0] == "scores" and argv[2] == "--sample" and argv[1] in rooms():
        return scores(argv[1], sampled=True)
    if len(argv) != 2 or argv[0] not in {"prepare", "functions", "scores"} or argv[1] not in rooms():
        print(__doc__, file=sys.stderr)
        print(f"rooms: {' '.join(rooms())}", file=sys.stderr)
        return 2
    if argv[0] == "prepare":
        prepare(argv[1])
        print(room_dir(argv[1]))
        return 0
    if argv[0] == "functions":
        print("\n".join(functions(argv[1])))
        return 0
    return scores(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
