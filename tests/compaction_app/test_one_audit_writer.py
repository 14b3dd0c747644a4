"""Every audit entry goes through compaction_app.audit.record_audit, so each has the same shape."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_ast import parse_source

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "compaction_app" / "audit.py"


def _parse(path: Path) -> ast.Module:
    return parse_source(path)


def _writes_audit_rows(path: Path) -> list[int]:
    tree = _parse(path)
    lines = []
    for node in ast.walk(tree):
        # AuditEntry.objects.create(...) / bulk_create(...), or AuditEntry(...).save()
        if isinstance(node, ast.Attribute) and node.attr in ("create", "bulk_create", "get_or_create"):
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "objects" and isinstance(owner.value, ast.Name)
                    and owner.value.id == "AuditEntry"):
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "AuditEntry":
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_audit_writer_creates_audit_rows():
    offenders = {
        str(path.relative_to(ROOT)): found
        for app in ("compaction_app", "sessions_app", "gateway_app", "compactweb")
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and path != WRITER and (found := _writes_audit_rows(path))
    }
    assert offenders == {}
    assert _writes_audit_rows(WRITER)  # the check itself sees the one writer
