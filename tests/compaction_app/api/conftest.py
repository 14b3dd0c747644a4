"""The session the alert and net-saving API tests read from: a file read, then a new user turn."""

from __future__ import annotations

import pytest

from compaction_app.engine.items import user_message
from tests.compaction_app.api.test_alerts import read_call


@pytest.fixture
def reader(make_session):
    return make_session(items=[
        user_message("look at src/ledger.py"), read_call("c1", "src/ledger.py"),
        {"type": "function_call_output", "call_id": "c1", "output": "def ledger():\n    pass\n" * 50},
        user_message("now fix it"),
    ])
