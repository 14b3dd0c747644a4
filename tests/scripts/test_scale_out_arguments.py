"""scripts/scale-out refuses a worker priority it cannot give before it starts anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("nice", ["20", "-5", "ten"])
def test_a_worker_nice_outside_0_to_19_is_refused_with_a_message(nice, tmp_path):
    done = subprocess.run([str(ROOT / "scripts" / "scale-out"), "--worker-nice", nice], cwd=ROOT,
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "COMPACTWEB_VAR_DIR": str(tmp_path)})
    assert done.returncode == 2
    assert "--worker-nice takes a whole number from 0 to 19" in done.stderr
    assert not (tmp_path / "scale-out").exists()  # nothing written, nothing started
