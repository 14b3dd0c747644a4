"""Whether parsed JSON is Unicode text (issue 41): a lone UTF-16 surrogate (`"\\ud800"`) is valid JSON that Python
parses into a string no UTF-8 encoder, tokenizer or database takes. The ASGI apps that parse their own bodies (the
gateway, the simulated model) refuse it with 400 up front rather than fail later with a 500. Plain Python."""

from __future__ import annotations

import json
import re
from typing import Any

# A lone surrogate gets into parsed JSON only written as an escape (raw UTF-8 cannot encode one; such bytes fail
# to decode), so a body without one costs a scan of its bytes, not a second encoding.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
LONE_SURROGATE = "a JSON string with a lone surrogate (\\ud800-\\udfff): not valid Unicode text"


def has_lone_surrogate(raw: bytes, value: Any) -> bool:
    """Whether `value`, parsed from the JSON body `raw`, holds a lone surrogate in a key or string."""
    if _SURROGATE_ESCAPE.search(raw) is None:
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
