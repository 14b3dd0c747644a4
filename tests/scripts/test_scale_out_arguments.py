"""scripts/scale-out refuses a worker priority it cannot give, or an app role that is no role name, before it starts
anything; its help names the least-privilege default (issue 27)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def scale_out(*args: str, var_dir) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "scripts" / "scale-out"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=30, env={**os.environ, "COMPACTWEB_VAR_DIR": str(var_dir)})


@pytest.mark.parametrize("nice", ["20", "-5", "ten"])
def test_a_worker_nice_outside_0_to_19_is_refused_with_a_message(nice, tmp_path):
    done = scale_out("--worker-nice", nice, var_dir=tmp_path)
    assert done.returncode == 2
    assert "--worker-nice takes a whole number from 0 to 19" in done.stderr
    assert not (tmp_path / "scale-out").exists()  # nothing written, nothing started


@pytest.mark.parametrize("role", ["bad name", "x;DROP", "1abc"])
def test_an_app_role_that_is_not_a_role_name_is_refused_before_anything_starts(role, tmp_path):
    done = scale_out("--app-role", role, var_dir=tmp_path)
    assert done.returncode == 2
    assert "--app-role takes a PostgreSQL role name" in done.stderr
    assert not (tmp_path / "scale-out").exists()


def test_the_least_privilege_role_is_the_default_and_opting_out_is_a_flag(tmp_path):
    done = scale_out("--help", var_dir=tmp_path)
    assert done.returncode == 0
    assert "default compactweb_app" in done.stdout and "--no-app-role" in done.stdout
