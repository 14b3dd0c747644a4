"""Round eight of the labelled set (issue 46): a held-out part written before any change of round eight.

`BLIND_15`, an event pipeline (Rust, Python, systemd, Terraform) moved to a new host: `terraform plan`'s counts,
`du -sh` of a spool folder, `systemctl show` values in bytes, a Rust panic with its place, pytest's slowest
durations, a YAML config read with `cat`, and a setting read from an env file that the user corrects later in chat;
summarised in French prose, as a German key-value list, or as bullets with abbreviations. No earlier part used these
tools, outputs or summary styles. Its truth is written by hand below, before any scorer ran on it; it is run once on
the scorer before round eight's changes and once after them, and its misses are never read: its figure is the
estimate for a benchmark never seen.

Lost renderings carry a swapped count, a wrong unit, a neighbouring value (another key of the same output, a setup
time for a call time), a caller's line for the raising line, the stale value of a corrected setting, or nothing.
Sessions are `labelled_set_round3.Session`s built like round seven's (a careful or sloppy summariser over one to
three compactions), so `labelled_set_round3.evaluate` counts them the same way.
"""

from __future__ import annotations

import random

from compaction_app.engine.items import user_message
from tests.compaction_app.engine.retention.labelled_set import exec_out, fcall, fout
from tests.compaction_app.engine.retention.labelled_set_round3 import Session
from tests.compaction_app.engine.retention.labelled_set_round4 import Claim, Planted
from tests.compaction_app.engine.retention.labelled_set_round7 import build_session

BLIND_15 = "blind_15"
PARTS = (BLIND_15,)


def _id(n: int, phase: int, slot: str) -> str:
    return f"r8_{n}_{phase}_{slot}"


# ---------------------------------------------------------------------------------------------------------------
# BLIND_15: an event pipeline moved to a new host (kept unread: run before and after round eight only)
# ---------------------------------------------------------------------------------------------------------------

def _terraform(n: int, phase: int, k: int) -> Planted:
    # terraform plan: the counts of the plan line (add, change, destroy); resources listed above it.
    add, change, destroy = 4 + k % 9, 1 + k % 3, 2 + k % 5
    c = _id(n, phase, "tfplan")
    body = (f"Terraform will perform the following actions:\n\n  # aws_instance.ingest[{k}] will be created\n"
            "  + resource \"aws_instance\" \"ingest\" {\n      + instance_type = \"m6i.large\"\n    }\n\n"
            f"  # aws_security_group.spool_{k} must be replaced\n-/+ resource \"aws_security_group\" \"spool\" {{\n"
            f"    }}\n\nPlan: {add} to add, {change} to change, {destroy} to destroy.")
    items = [fcall(c, "exec_command", cmd=f"terraform plan -no-color -var-file=env/stage-{k}.tfvars"),
             fout(c, exec_out(0, body))]
    return Planted("value", f"{add} to add", "terraform plan", items, [
        ("verbatim", True, True, None),
        ("fr", True, False, Claim(f"tf plan stage-{k}", f"+{add} ~{change} -{destroy}", f"Le plan Terraform de "
                                  f"stage-{k} ajoute {add} ressources, en modifie {change} et en détruit {destroy}.")),
        ("words", True, False, Claim(f"tf plan stage-{k}", f"{add} hinzufügen, {change} ändern, {destroy} löschen",
                                     f"Pour stage-{k}, terraform plan annonce {add} to add, {change} to change, "
                                     f"{destroy} to destroy.")),
        ("swapped", False, False, Claim(f"tf plan stage-{k}", f"+{destroy} ~{change} -{add}", f"Le plan Terraform "
                                        f"de stage-{k} ajoute {destroy} ressources, en modifie {change} et en "
                                        f"détruit {add}.")),
        ("no destroy", False, False, Claim(f"tf plan stage-{k}", f"+{add}, nichts wird gelöscht", f"Le plan "
                                           f"Terraform de stage-{k} ajoute {add} ressources et ne détruit rien.")),
        ("dropped", False, False, None),
    ])


def _du(n: int, phase: int, k: int) -> Planted:
    # du -sh of a spool folder: a size with du's one-letter unit (G is GiB).
    tenths = 21 + k % 60
    size = f"{tenths // 10}.{tenths % 10}"
    folder = f"/var/lib/pipeline/spool-{k}"
    c = _id(n, phase, "du")
    items = [fcall(c, "exec_command", cmd=f"du -sh {folder}"), fout(c, exec_out(0, f"{size}G\t{folder}"))]
    comma = size.replace(".", ",")
    return Planted("value", f"spool-{k}", "du size", items, [
        ("verbatim", True, True, None),
        ("fr", True, False, Claim(f"spool-{k}", f"{comma} Go", f"Le dossier spool-{k} occupe {comma} Go sur le "
                                  "disque.")),
        ("GiB", True, False, Claim(f"spool-{k}", f"{size} GiB", f"Le spool {folder} pèse {size} GiB.")),
        ("wrong unit", False, False, Claim(f"spool-{k}", f"{comma} Mo", f"Le dossier spool-{k} occupe {comma} Mo "
                                           "sur le disque.")),
        ("tenfold", False, False, Claim(f"spool-{k}", f"{tenths} GiB", f"Le spool {folder} pèse {tenths} GiB.")),
        ("dropped", False, False, None),
    ])


def _systemctl(n: int, phase: int, k: int) -> Planted:
    # systemctl show: MemoryMax in bytes among other properties.
    mib = 1024 + 256 * (k % 8)
    limit = mib * 1048576
    tasks = 256 + 64 * (k % 5)
    unit = f"ingest-{k}.service"
    c = _id(n, phase, "sysshow")
    items = [fcall(c, "exec_command", cmd=f"systemctl show {unit} -p MemoryMax -p TasksMax -p Restart "
                                          "-p RestartUSec"),
             fout(c, exec_out(0, f"MemoryMax={limit}\nTasksMax={tasks}\nRestart=on-failure\nRestartUSec=5s"))]
    gib = mib / 1024
    return Planted("value", str(limit), "systemctl memory", items, [
        ("verbatim", True, True, None),
        ("MiB", True, False, Claim(f"{unit}", f"MemoryMax {mib} MiB", f"Le service {unit} est limité à {mib} MiB "
                                   "de mémoire (MemoryMax).")),
        ("GiB", True, False, Claim(f"{unit}", f"MemoryMax={gib:g}G, TasksMax={tasks}", f"{unit} a MemoryMax à "
                                   f"{gib:g} GiB et TasksMax à {tasks}.")),
        ("wrong unit", False, False, Claim(f"{unit}", f"MemoryMax {mib} KiB", f"Le service {unit} est limité à "
                                           f"{mib} KiB de mémoire (MemoryMax).")),
        ("tasks as memory", False, False, Claim(f"{unit}", f"MemoryMax {tasks} MiB", f"Le service {unit} est "
                                                f"limité à {tasks} MiB de mémoire (MemoryMax).")),
        ("dropped", False, False, None),
    ])


def _rust_panic(n: int, phase: int, k: int) -> Planted:
    # A Rust panic: the place it was raised, the unwrap's error after it; exit 101.
    line, col = 60 + k % 180, 9 + k % 30
    c = _id(n, phase, "panic")
    items = [fcall(c, "exec_command", cmd=f"cargo run --release -- --shard {k}"),
             fout(c, exec_out(101, "    Finished `release` profile [optimized] target(s) in 0.21s\n"
                                   f"     Running `target/release/spooler --shard {k}`\n"
                                   f"thread 'main' panicked at src/shard/reader.rs:{line}:{col}:\n"
                                   "called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound, "
                                   "message: \"No such file or directory\" }\n"
                                   "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"))]
    return Planted("error", f"reader.rs:{line}", "rust panic", items, [
        ("verbatim", True, True, None),
        ("place", True, False, Claim(f"spooler shard {k}", f"panic reader.rs:{line} (unwrap NotFound)",
                                     f"Le spooler du shard {k} panique à src/shard/reader.rs:{line}:{col} : unwrap() "
                                     "sur une erreur NotFound (fichier introuvable).")),
        ("line in words", True, False, Claim(f"spooler shard {k}", f"reader.rs Zeile {line}: Datei fehlt",
                                             f"La ligne {line} de src/shard/reader.rs panique car le fichier du shard "
                                             f"{k} n'existe pas (NotFound).")),
        ("wrong line", False, False, Claim(f"spooler shard {k}", f"panic reader.rs:{line + 12}", f"Le spooler du "
                                           f"shard {k} panique à src/shard/reader.rs:{line + 12}.")),
        ("generic", False, False, Claim(f"spooler shard {k}", "stürzt ab", f"Le spooler du shard {k} plante.")),
        ("dropped", False, False, None),
    ])


def _durations(n: int, phase: int, k: int) -> Planted:
    # pytest --durations: the slowest call among setup and call rows.
    slow = 5.0 + (k % 40) / 10 + 0.03
    setup = 1.5 + (k % 7) / 10
    test = f"tests/etl_{k}/test_load.py::test_bulk_insert"
    c = _id(n, phase, "durations")
    items = [fcall(c, "exec_command", cmd=f"pytest --durations=3 -q tests/etl_{k}"),
             fout(c, exec_out(0, "........................................ [100%]\n"
                                 "============================= slowest 3 durations =============================\n"
                                 f"{slow:.2f}s call     {test}\n"
                                 f"{setup:.2f}s setup    tests/etl_{k}/test_load.py::test_bulk_insert\n"
                                 f"0.41s call     tests/etl_{k}/test_schema.py::test_columns\n"
                                 "40 passed in 12.31s"))]
    return Planted("value", f"{slow:.2f}", "pytest duration", items, [
        ("verbatim", True, True, None),
        ("seconds", True, False, Claim(f"etl_{k} test_bulk_insert", f"{slow:.1f} s (call)", f"Dans tests/etl_{k}, "
                                       f"test_bulk_insert est le plus lent : {slow:.1f} s.")),
        ("ms", True, False, Claim(f"etl_{k} test_bulk_insert", f"{slow * 1000:.0f} ms", f"test_bulk_insert de "
                                  f"etl_{k} prend {slow * 1000:.0f} ms.")),
        ("setup as call", False, False, Claim(f"etl_{k} test_bulk_insert", f"{setup:.2f} s", f"Dans tests/etl_{k}, "
                                              f"test_bulk_insert prend {setup:.2f} s.")),
        ("wrong unit", False, False, Claim(f"etl_{k} test_bulk_insert", f"{slow:.2f} ms", f"test_bulk_insert de "
                                           f"etl_{k} prend {slow:.2f} ms.")),
        ("dropped", False, False, None),
    ])


def _yaml(n: int, phase: int, k: int) -> Planted:
    # A YAML config read with cat: a nested leaf (batch.size) among siblings.
    size = 4000 + 7 * k
    c = _id(n, phase, "yaml")
    path = f"deploy/pipeline-{k}.yaml"
    items = [fcall(c, "exec_command", cmd=f"cat {path}"),
             fout(c, exec_out(0, f"pipeline:\n  name: events-{k}\n  batch:\n    size: {size}\n    timeout: 45s\n"
                                 f"  retries: 3\nsink:\n  url: postgres://warehouse-{k}:5432/events\n  pool: 12"))]
    return Planted("value", str(size), "yaml leaf", items, [
        ("verbatim", True, True, None),
        ("de", True, False, Claim(f"pipeline-{k}.yaml", f"Batchgröße {size:,}".replace(",", "."),
                                  f"Dans {path}, la taille de batch (batch.size) est de {size}.")),
        ("path", True, False, Claim(f"pipeline-{k}.yaml", f"batch.size={size}, timeout 45 s", f"{path} : batch.size "
                                    f"= {size}, timeout de 45 s.")),
        ("pool as size", False, False, Claim(f"pipeline-{k}.yaml", "Batchgröße 12", f"Dans {path}, la taille de "
                                             "batch est de 12.")),
        ("wrong value", False, False, Claim(f"pipeline-{k}.yaml", f"batch.size={size - 7}", f"{path} : batch.size "
                                            f"= {size - 7}.")),
        ("dropped", False, False, None),
    ])


def _corrected_in_chat(n: int, phase: int, k: int) -> Planted:
    # A setting read from an env file, then corrected by the user in chat: only the user's value counts.
    var = ("DB_POOL_SIZE", "DB_POOL_RECYCLE_S", "DB_POOL_TIMEOUT_S")[phase]
    old, new = 25, 40 + 5 * (k % 7)
    c = _id(n, phase, "envgrep")
    items = [fcall(c, "exec_command", cmd=f"grep -n ^DB_POOL .env.staging-{k}"),
             fout(c, exec_out(0, f"3:DB_MAX_CONN=200\n4:{var}={old}")),
             user_message(f"fyi the {old} is stale, I changed {var} on staging-{k} to {new} yesterday, go with "
                          "that")]
    return Planted("value", var, "corrected in chat", items, [
        ("verbatim", True, True, None),
        ("fr", True, False, Claim(f"staging-{k} {var}", f"{new} (vorher {old})", f"Sur staging-{k}, {var} vaut "
                                  f"maintenant {new} (l'utilisateur l'a changé, ce n'est plus {old}).")),
        ("assignment", True, False, Claim(f"staging-{k}", f"{var}={new}", f"staging-{k} tourne avec {var}={new}.")),
        ("stale", False, False, Claim(f"staging-{k}", f"{var}={old}", f"staging-{k} tourne avec {var}={old}.")),
        ("no value", False, False, Claim(f"staging-{k} {var}", "vom Nutzer geändert", f"L'utilisateur a changé "
                                         f"{var} sur staging-{k}.")),
        ("dropped", False, False, None),
    ])


def _blind_15(n: int, phase: int) -> list[Planted]:
    k = n * 10 + phase
    return [make(n, phase, k) for make in (_terraform, _du, _systemctl, _rust_panic, _durations, _yaml,
                                           _corrected_in_chat)]


# ---------------------------------------------------------------------------------------------------------------
# Summary styles: French prose, a German key-value list, bullets with abbreviations
# ---------------------------------------------------------------------------------------------------------------

STYLES = {BLIND_15: ("fr", "de", "abbr")}
ABBREVIATIONS = (("service", "svc"), ("pipeline", "pl"), ("staging", "stg"), ("Zeile", "Z."), ("vorher", "vorh."),
                 ("seconds", "s"), ("spooler", "spl"))


def render(style: str, claims: list[tuple[str, Claim]]) -> str:
    if not claims:
        return "rien pour l'instant"
    if style == "fr":  # French prose: one paragraph, the claims as sentences
        return "Résumé de la session jusqu'ici. " + " ".join(c.sentence for _, c in claims)
    if style == "de":  # a German key-value list
        return "Stand der Dinge:\n" + "\n".join(f"* {c.label} — {c.value}" for _, c in claims)
    lines = []
    for _, c in claims:  # bullets with abbreviations
        text = f"- {c.label}: {c.value}"
        for word, short in ABBREVIATIONS:
            text = text.replace(word, short)
        lines.append(text)
    return "status (abbr.):\n" + "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Sessions: a careful or sloppy summariser, one to three compactions (as round seven's)
# ---------------------------------------------------------------------------------------------------------------

def _build(n: int, part: str, rng: random.Random) -> Session:
    goal = f"Move event pipeline {n} to the new host without losing a batch."
    return build_session(n, part, rng, make=_blind_15, goal=goal, phases=1 + (n * 5) % 3, styles=STYLES[part], render=render)


def sessions(part: str = BLIND_15, count: int = 40, seed: int = 468) -> list[Session]:
    rng = random.Random(f"{seed}-{part}")
    return [_build(n, part, rng) for n in range(1, count + 1)]


GROUPS = {BLIND_15: ("terraform plan", "du size", "systemctl memory", "rust panic", "pytest duration", "yaml leaf",
                     "corrected in chat")}
