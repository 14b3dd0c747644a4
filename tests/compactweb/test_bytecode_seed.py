"""A set's bytecode cache is seeded with the bytecode compiled beside the sources (compactweb/bytecode_seed.py, issue
42): with PYTHONPYCACHEPREFIX set, Python reads bytecode only from the prefix, so without seeding a set's first
start compiled every module of the standard library and of a virtualenv installed with compiled bytecode again."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

from compactweb import bytecode_seed


def compiled_module(root: Path, name: str = "seeded_here", value: int = 1) -> Path:
    """`root/<name>.py` compiled beside itself (`__pycache__`), as an install with compiled bytecode leaves it."""
    root.mkdir(parents=True, exist_ok=True)
    source = root / f"{name}.py"
    source.write_text(f"VALUE = {value}\n")
    py_compile.compile(str(source), doraise=True)
    return source


def value_imported(root: Path, prefix: Path, name: str = "seeded_here") -> str:
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", f"import {name}; print({name}.VALUE)"], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_start_under_the_prefix_reads_the_bytecode_compiled_beside_the_source(tmp_path):
    root, prefix = tmp_path / "site", tmp_path / "prefix"
    source = compiled_module(root, value=1)
    # The source changes but keeps its size and mtime, which is all a bytecode header is checked against: a start
    # that reads the compiled file sees 1, one that compiles the source sees 2.
    stat = source.stat()
    source.write_text("VALUE = 2\n")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert value_imported(root, prefix) == "2"  # not seeded: the prefix is empty and the source is compiled

    added = bytecode_seed.seed(prefix, [root])

    assert added == 1
    assert value_imported(root, prefix) == "1"
    seeded = bytecode_seed.in_prefix(prefix, source)
    assert seeded.stat().st_ino == (root / "__pycache__" / seeded.name).stat().st_ino  # a link, not a copy


def test_bytecode_already_in_the_prefix_is_left_alone(tmp_path):
    root, prefix = tmp_path / "site", tmp_path / "prefix"
    source = compiled_module(root)
    target = bytecode_seed.in_prefix(prefix, source)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"compiled by a start of the set")

    assert bytecode_seed.seed(prefix, [root]) == 0
    assert target.read_bytes() == b"compiled by a start of the set"


def test_only_plain_bytecode_with_its_source_is_seeded(tmp_path):
    root, prefix = tmp_path / "site", tmp_path / "prefix"
    source = compiled_module(root)
    py_compile.compile(str(source), doraise=True, optimize=1)  # .opt-1.pyc: not what a plain start reads
    orphan = compiled_module(root, name="sourceless")
    orphan.unlink()  # its bytecode stays, with no source beside it

    assert bytecode_seed.seed(prefix, [root]) == 1
    assert [path.name for path in prefix.rglob("*.pyc")] == [bytecode_seed.in_prefix(prefix, source).name]


def test_a_root_is_walked_again_only_once_it_changed(tmp_path):
    root, other, prefix = tmp_path / "site", tmp_path / "stdlib", tmp_path / "prefix"
    compiled_module(root)
    compiled_module(other, name="other")
    prefix.mkdir()
    assert bytecode_seed.stale_roots(prefix, [root, other]) == [root, other]  # never walked

    bytecode_seed.record(prefix, [root, other])
    assert bytecode_seed.stale_roots(prefix, [root, other]) == []

    os.utime(root, (1, 1))  # an install into it
    assert bytecode_seed.stale_roots(prefix, [root, other]) == [root]


def test_the_prefix_path_is_where_python_looks_for_a_sources_bytecode(tmp_path, monkeypatch):
    import importlib.util

    source = tmp_path / "pkg" / "mod.py"
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))

    assert str(bytecode_seed.in_prefix(tmp_path / "prefix", source)) == importlib.util.cache_from_source(str(source))


def test_git_data_javascript_packages_and_run_directories_are_not_walked(tmp_path):
    root, prefix = tmp_path / "project", tmp_path / "prefix"
    kept = compiled_module(root / "app")
    for skipped in (".git", "node_modules", "var"):
        compiled_module(root / skipped / "deeper", name="not_walked")

    assert bytecode_seed.seed(prefix, [root]) == 1
    assert [path.name for path in prefix.rglob("*.pyc")] == [bytecode_seed.in_prefix(prefix, kept).name]


def test_the_project_directory_is_an_import_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", str(tmp_path / "missing"), str(tmp_path)])

    assert bytecode_seed.import_roots() == [tmp_path]
