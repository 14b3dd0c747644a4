"""One scale-out set per run directory (issue 31): a second scripts/scale-out exits while the first holds the
set's lock, and a launcher first stops what a killed supervisord left serving (found by the run directory in their
environment), before anything else. Neither needs the database: the launcher stops (at migrate, on a database that
is not there) after the part under test. The supervisord configuration sends TERM to a worker's main process only,
so its running task finishes (Celery's warm shutdown)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "COMPACTWEB_SCALE_OUT_RUN_DIR"


def launch(var_dir: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COMPACTWEB_VAR_DIR": str(var_dir), "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
           "REDIS_URL": "redis://127.0.0.1:1/0", "CELERY_BROKER_URL": "redis://127.0.0.1:1/1", **extra}
    if "PYTHONPYCACHEPREFIX" not in extra:  # the launcher's own choice, whatever the runner's environment says
        env.pop("PYTHONPYCACHEPREFIX", None)
    return subprocess.run([str(ROOT / "scripts" / "scale-out")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_second_launcher_exits_while_a_set_holds_the_lock(tmp_path):
    run_dir = tmp_path / "scale-out"
    run_dir.mkdir()
    (run_dir / "supervisord.pid").write_text("4242\n")
    with open(run_dir / "scale-out.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what the running set's supervisord holds

        done = launch(tmp_path)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "a set already runs from" in done.stderr and "4242" in done.stderr
    assert "migrating" not in done.stdout and not (run_dir / "supervisord.conf").exists()


def test_a_launcher_stops_what_a_killed_supervisord_left_running_before_it_starts(tmp_path):
    run_dir = tmp_path / "scale-out"
    run_dir.mkdir()
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                              env={**os.environ, MARKER: str(run_dir)})
    try:
        deadline = time.monotonic() + 30
        while str(run_dir).encode() not in Path(f"/proc/{orphan.pid}/environ").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.05)

        done = launch(tmp_path)

        assert orphan.wait(timeout=10) == -15  # TERM, and it ended
        assert f"stopped 1 process(es) a previous set left running: [{orphan.pid}]" in done.stdout
        assert done.stdout.index("stopped 1 process") < done.stdout.index("migrating")
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


def test_a_workers_stop_signal_reaches_its_main_process_only():
    script = (ROOT / "scripts" / "scale-out").read_text()
    worker = script[script.index('program "worker-$i"') - 400:script.index('program "worker-$i"') + 40]
    assert 'program "worker-$i" 60 false ' in worker  # stopasgroup=false: no TERM to the prefork children
    assert "killasgroup=true" in script and "stopasgroup=$stopasgroup" in script
    assert f'environment={MARKER}="$RUN_DIR"' in script


def test_the_sets_python_starts_keep_their_bytecode_in_the_run_directory_even_where_none_is_written(tmp_path):
    # issue 42: without a bytecode cache each Python start of a set compiled its ~1,600 modules again
    done = launch(tmp_path, PYTHONDONTWRITEBYTECODE="1")

    cache = tmp_path / "scale-out" / "pycache"
    # the launcher's own Python steps: the database check, the orphan stop, the Django start that migrates
    written = {path.name.split(".")[0] for path in cache.rglob("*.pyc")}
    assert {"set_database", "orphans", "settings"} <= written, done.stdout + done.stderr


def test_an_operators_own_bytecode_prefix_is_kept(tmp_path):
    own = tmp_path / "own-prefix"

    done = launch(tmp_path, PYTHONPYCACHEPREFIX=str(own), PYTHONDONTWRITEBYTECODE="")

    assert any(own.rglob("set_database*.pyc")), done.stdout + done.stderr
    assert not (tmp_path / "scale-out" / "pycache").exists()


def test_the_sets_bytecode_cache_is_seeded_once_with_the_bytecode_beside_the_sources(tmp_path):
    # issue 42: with a prefix Python reads no bytecode from beside the sources (a virtualenv installed with compiled
    # bytecode, the standard library's), so the set's first start compiled all of it again
    import py_compile

    from compactweb.bytecode_seed import in_prefix

    site = tmp_path / "site"
    site.mkdir()
    (site / "installed_module.py").write_text("VALUE = 1\n")
    py_compile.compile(str(site / "installed_module.py"), doraise=True)
    prefix = tmp_path / "scale-out" / "pycache"

    first = launch(tmp_path, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")

    seeded = in_prefix(prefix, site / "installed_module.py")
    assert seeded.is_file(), first.stdout + first.stderr
    assert seeded.read_bytes() == (site / "__pycache__" / seeded.name).read_bytes()
    assert f"\t{site}\n" in (prefix / "seeded").read_text()
    assert "linked into the set's cache" in first.stdout

    again = launch(tmp_path, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")

    assert "bytecode:" not in again.stdout  # nothing changed: the launcher did not even start Python for it
