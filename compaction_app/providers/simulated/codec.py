"""The opaque `encrypted_content` of the simulator's compaction and reasoning items.

To a client it is an opaque base64 string, like OpenAI's; the simulator itself decodes it, so a later request that
carries a compaction item can "remember" the summary it stands for. Layout: base64url(MAGIC + zlib(JSON)).
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

MAGIC = b"CWSIM1\x00"


def encode(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(MAGIC + zlib.compress(raw, 9)).decode("ascii")


def decode(content: str | None) -> dict[str, Any] | None:
    """The payload of a string `encode` produced; None for anything else (e.g. a real provider's ciphertext)."""
    if not content:
        return None
    try:
        blob = base64.urlsafe_b64decode(content.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    if not blob.startswith(MAGIC):
        return None
    try:
        payload = json.loads(zlib.decompress(blob[len(MAGIC) :]).decode("utf-8"))
    except (zlib.error, ValueError, UnicodeDecodeError):
        return None
    return payload if isinstance(payload, dict) else None
