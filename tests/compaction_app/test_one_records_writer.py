"""Every Compaction, CompactionAttempt and HookRun row is written through compaction_app.records, so each
transition of an attempt (running -> completed / failed / interrupted) and of a compaction (rolled back, redone)
has one owner."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "compaction_app" / "records.py"
MODELS = frozenset({"Compaction", "CompactionAttempt", "HookRun"})
# Related managers that reach the same rows from a session, a compaction or an attempt.
RELATED = frozenset({"compactions", "compaction_attempts", "attempts", "hook_runs"})
WRITES = frozenset({"create", "bulk_create", "get_or_create", "update_or_create", "update", "bulk_update", "delete"})


def _parse(path: Path) -> ast.Module:
    return parse_source(path)


def _reaches_the_rows(node: ast.expr) -> bool:
    """Whether a call chain such as `CompactionAttempt.objects.filter(...)` or `session.compaction_attempts`
    starts at one of the records' managers."""
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call):
            node = node.func
            continue
        if node.attr == "objects" and isinstance(node.value, ast.Name) and node.value.id in MODELS:
            return True
        if node.attr in RELATED and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
            return True  # (`self.attempts` is a consumer's own dict, not a related manager)
        node = node.value
    return False


def _writes_records(path: Path) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(_parse(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES
        and _reaches_the_rows(node.func.value)
    ]


def test_no_module_but_the_records_writer_writes_compaction_attempt_or_hook_run_rows():
    offenders = {
        str(path.relative_to(ROOT)): found
        for app in ("compaction_app", "sessions_app", "gateway_app", "compactweb")
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and path != WRITER and (found := _writes_records(path))
    }
    assert offenders == {}


def test_the_check_sees_each_kind_of_write(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "CompactionAttempt.objects.filter(pk=1).update(status='failed')\n"
        "Compaction.objects.bulk_create([])\n"
        "session.compaction_attempts.filter(status='running').delete()\n"
        "HookRun.objects.create(attempt_id=1)\n"
        "Compaction.objects.filter(pk=1).first()\n"  # a read: not a write
    )
    assert _writes_records(sample) == [1, 2, 3, 4]
    assert len(_writes_records(WRITER)) >= 8  # the writer itself is seen
