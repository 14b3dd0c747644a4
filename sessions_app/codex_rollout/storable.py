"""A rollout line's JSON that both databases can store, or a reason why not (issue 27).

Python's `json` accepts what PostgreSQL's jsonb and SQLite's integers refuse, and each refusal used to surface as a
500 after the import had started: `NaN` and `Infinity` (and `1e999`, which becomes infinity), integers past 64 bits
(and past Python's 4300-digit limit, a ValueError of its own), lone UTF-16 surrogates (`"\\ud800"`, not valid
UTF-8 text), `\\u0000` (jsonb cannot hold it), and nesting deep enough to exhaust the recursion limit. `loads`
refuses all of these with `Unstorable`, except NUL, which `nul_count` reports so a tolerant import can strip it
(`parse.strip_nul`) and a strict one refuse the line. Plain Python.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
MAX_NUMBER_CHARS = 400  # a number's text; far past any int64 or any float's digits


class Unstorable(ValueError):
    """Valid JSON that no database here can store as it is."""


def _constant(name: str) -> Any:
    raise Unstorable(f"{name} is not a JSON number a database can store")


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise Unstorable("an integer with more than 400 digits")
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise Unstorable("an integer outside the 64-bit range")
    return value


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise Unstorable("a number with more than 400 characters")
    value = float(text)
    if not math.isfinite(value):
        raise Unstorable(f"the number {text[:40]} is out of range (it would be infinity)")
    return value


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check(value: Any) -> int:
    """Raise Unstorable for nesting past MAX_DEPTH or a lone surrogate in a key or string; return how many NUL
    characters the strings and keys hold."""
    nul = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise Unstorable(f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, str):
            if not node.isascii():
                if _has_lone_surrogate(node):
                    raise Unstorable("a string with a lone UTF-16 surrogate (\\ud800-\\udfff): not valid Unicode text")
            nul += node.count("\x00")
        elif isinstance(node, dict):
            stack.extend((k, depth) for k in node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return nul


def loads(text: str) -> tuple[Any, int]:
    """Parse one line: the value and its NUL count. Raises json.JSONDecodeError for text that is not JSON and
    Unstorable for JSON no database here stores."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_int=_int, parse_float=_float)
    except RecursionError:
        raise Unstorable(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    return value, check(value)
