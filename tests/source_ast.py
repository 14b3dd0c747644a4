"""ast.parse for the source-scanning tests (one writer per kind of row), robust to a CPython 3.11 bug.

After a RecursionError (the deeply nested JSON tests raise some), CPython 3.11 can leave an AST recursion counter
off, and ast.parse then fails with SystemError "AST constructor recursion depth mismatch". A fresh thread avoids
it in most runs but not all; a fresh interpreter always does, so a file that still fails is parsed there and its
tree comes back pickled (unpickling builds the nodes without that check)."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_IN_A_FRESH_INTERPRETER = (
    "import ast, pickle, sys; path = sys.argv[1]; "
    "sys.stdout.buffer.write(pickle.dumps(ast.parse(open(path, encoding='utf-8').read(), filename=path)))"
)


def parse_source(path: Path) -> ast.Module:
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ast.parse, path.read_text(), filename=str(path)).result()
    except SystemError:
        tree = subprocess.run([sys.executable, "-c", _IN_A_FRESH_INTERPRETER, str(path)], capture_output=True,
                              check=True, timeout=60).stdout
        return pickle.loads(tree)  # noqa: S301 - our own interpreter's output for a file of this repository
