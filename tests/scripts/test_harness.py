"""The test harness (tests/conftest.py, scripts/test), through the commands a developer types: the services pass
keeps the tests that touch a service, read from what they ask for; a test that builds a channel layer without
saying so fails; a test asking for PostgreSQL or Redis never uses whatever answers at the default address; and
`scripts/test --help` helps instead of running anything; and a run keeps the bytecode it compiles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = "tests/scripts/harness_samples/samples.py"
POINTERS = ("CI", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "COMPACTWEB_TEST_REDIS_URL",
            "COMPACTWEB_TEST_POSTGRES_URL")


def outside_ci(tmp_path: Path) -> dict[str, str]:
    """This machine's environment as a developer has it: no CI, pointed at no service."""
    env = {k: v for k, v in os.environ.items() if k not in POINTERS and not k.startswith("PYTEST_")}
    env.update(COMPACTWEB_VAR_DIR=str(tmp_path / "var"), TMPDIR=str(tmp_path))
    return env


def pytest_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:randomly", SAMPLES, *args],
                          cwd=ROOT, env=outside_ci(tmp_path), capture_output=True, text=True, timeout=240)


def outcomes(result: subprocess.CompletedProcess) -> dict[str, str]:
    """test name -> its last verbose outcome (PASSED, FAILED, SKIPPED, ERROR: a teardown error follows a pass)."""
    found = {}
    for line in result.stdout.splitlines():
        if line.startswith(SAMPLES + "::"):
            name, _, rest = line[len(SAMPLES) + 2:].partition(" ")
            found[name] = rest.split(" ")[0]
    return found


def collected(result: subprocess.CompletedProcess) -> set[str]:
    return {line.strip()[len("<Function "):-1] for line in result.stdout.splitlines()
            if line.strip().startswith("<Function ")}


def test_the_services_pass_keeps_the_tests_that_ask_for_a_database_a_service_or_the_channel_layer(tmp_path):
    result = pytest_run(tmp_path, "--collect-only", "--database-tests-only")
    assert result.returncode == 0, result.stdout + result.stderr
    assert collected(result) == {"test_with_db", "test_marked_channel_layer", "test_asks_for_redis",
                                 "test_asks_for_postgres"}


def test_the_embedded_pass_leaves_the_postgresql_tests_to_the_services_pass_when_asked(tmp_path):
    result = pytest_run(tmp_path, "--collect-only", "--postgresql-tests-elsewhere")
    assert result.returncode == 0, result.stdout + result.stderr
    assert collected(result) == {"test_pure", "test_with_db", "test_marked_channel_layer",
                                 "test_unmarked_channel_layer", "test_asks_for_redis"}


def test_a_channel_layer_built_unmarked_fails_and_service_tests_skip_unless_pointed_at(tmp_path):
    result = pytest_run(tmp_path)
    seen = outcomes(result)
    assert seen["test_pure"] == "PASSED" and seen["test_with_db"] == "PASSED"
    assert seen["test_marked_channel_layer"] == "PASSED"
    # the test itself passes; the check after it errors, naming the mark to add
    assert seen["test_unmarked_channel_layer"] == "ERROR" and "@pytest.mark.channel_layer" in result.stdout
    assert seen["test_asks_for_redis"] == "SKIPPED" and "set REDIS_URL" in result.stdout
    assert seen["test_asks_for_postgres"] == "SKIPPED" and "set DATABASE_URL" in result.stdout


def test_scripts_test_help_says_what_it_runs_and_runs_nothing(tmp_path):
    result = subprocess.run([str(ROOT / "scripts" / "test"), "--help"], cwd=ROOT, env=outside_ci(tmp_path),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("Usage: scripts/test")
    for promise in ("services", "DATABASE_URL", "REDIS_URL", "-k", "PASS_BUDGET_MINUTES"):
        assert promise in result.stdout
    assert "== pytest" not in result.stdout and "lint-imports\n" not in result.stdout


def test_scripts_test_pointed_at_only_one_service_refuses_before_running_anything(tmp_path):
    env = {**outside_ci(tmp_path), "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"}
    result = subprocess.run([str(ROOT / "scripts" / "test"), "-k", "nothing_at_all"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "set both DATABASE_URL and REDIS_URL" in result.stderr
    assert "== pytest" not in result.stdout


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """scripts/test run on one sample test, under PYTHONDONTWRITEBYTECODE, with a var/ of its own."""
    tmp_path = tmp_path_factory.mktemp("sample_run")
    env = {**outside_ci(tmp_path), "PYTHONDONTWRITEBYTECODE": "1",
           "COMPACTWEB_SAMPLE_REPORT": str(tmp_path / "report")}
    env.pop("COMPACTWEB_TEST_PORTS", None)  # the run's own choice, not the one this test's pass was given
    result = subprocess.run([str(ROOT / "scripts" / "test"), "tests/scripts/harness_samples/bytecode_sample.py",
                             "-p", "no:randomly"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path, result


def test_scripts_test_keeps_the_bytecode_its_python_starts_compile_even_where_the_host_says_not_to(sample_run):
    """Each of a run's hundreds of Python starts (pytest, Daphne, workers, launchers) would otherwise compile its
    ~1,600 modules again (docs/benchmarks.md, "Bytecode in the test run")."""
    tmp_path, _ = sample_run
    assert (tmp_path / "report").read_text().splitlines()[0] == "dont_write_bytecode=False"


def test_scripts_test_gives_each_pass_ports_of_its_own_below_the_kernels_ephemeral_range(sample_run):
    """A server a test starts on a port the kernel also hands out for outgoing connections can find it held (a
    scale-out web process on port + 1 once restarted for eight minutes): the embedded pass gets 20000-20999."""
    tmp_path, _ = sample_run
    low, _high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert (tmp_path / "report").read_text().splitlines()[1] == "ports=20000-20999"
    assert 20999 < low


def test_scripts_test_writes_its_passes_logs_and_exit_codes_under_the_var_dir_it_is_given(sample_run):
    """A run inside a run (the test above, in CI's embedded pass) must not clear or overwrite the outer run's
    var/test-runs: it did once, and the outer run's logs got the inner run's lines."""
    tmp_path, _ = sample_run
    runs = tmp_path / "var" / "test-runs"
    assert (runs / "embedded.log").is_file() and (runs / "embedded.rc").read_text().startswith("0 ")
    assert (runs / "embedded").is_dir()  # the pass's own var/: its SQLite file and secret key


def test_the_scale_out_pass_and_the_services_pass_split_the_tests_by_the_scale_out_directory(tmp_path):
    """scripts/test gives tests/scale_out a pass of its own (`--scale-out-tests=only`) and leaves it out of the
    services pass (`elsewhere`): between them every test once, whatever paths the run is given."""
    scale_out = "tests/scale_out/test_checks.py"

    def collect(*args: str) -> set[str]:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", SAMPLES, scale_out, *args],
            cwd=ROOT, env=outside_ci(tmp_path), capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        return {line.split("::")[0] for line in result.stdout.splitlines() if "::" in line}

    assert collect() == {SAMPLES, scale_out}
    assert collect("--scale-out-tests=only") == {scale_out}
    assert collect("--scale-out-tests=elsewhere") == {SAMPLES}
