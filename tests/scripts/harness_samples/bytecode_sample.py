"""A test for tests/scripts/test_harness.py to run through scripts/test (the file name keeps it out of the suite):
it writes down whether its Python may write bytecode, and the range of ports its pass was given."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def test_reports_whether_bytecode_is_written():
    Path(os.environ["COMPACTWEB_SAMPLE_REPORT"]).write_text(
        f"dont_write_bytecode={sys.dont_write_bytecode}\nports={os.environ.get('COMPACTWEB_TEST_PORTS')}")
