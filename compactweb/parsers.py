"""The API's JSON parser, refusing with 400 what DRF's own would turn into a 500 (issue 14): nesting deep enough
to exhaust Python's recursion limit, and lone UTF-16 surrogates (`"\\ud800"`), valid JSON that no database can
store as UTF-8 text."""

from __future__ import annotations

import json

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 64


def _depth_problem(value, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return False


def check_json_value(value) -> None:
    """Raise ParseError for a value nested deeper than MAX_DEPTH or holding a lone surrogate (key or string)."""
    if _depth_problem(value):
        raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ParseError("JSON string with a lone surrogate (\\ud800-\\udfff): not valid Unicode text") from None


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
        check_json_value(data)
        return data
