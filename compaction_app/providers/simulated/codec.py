"""The opaque `encrypted_content` of the simulator's compaction and reasoning items.

To a client it is an opaque base64 string, like OpenAI's; the simulator itself decodes it, so a later request that
carries a compaction item can "remember" the summary it stands for. Layout: base64url(MAGIC + zlib(JSON)).

Decoding is bounded (issue 27): a payload never inflates past MAX_PAYLOAD_BYTES, so a kilobyte of crafted zlib
cannot make the server allocate gigabytes. What `encode` writes is a digest of capped lists (well under a tenth of
the bound); a blob with the marker that inflates past it raises `PayloadTooLarge`, which the simulated model
answers with a 400 and item validation refuses before anything is stored.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from typing import Any

MAGIC = b"CWSIM1\x00"
MAX_PAYLOAD_BYTES = 256 * 1024
# Every blob with the marker starts with these base64 characters (its first six bytes): anything else is someone
# else's ciphertext, told apart without decoding it.
_PREFIX = base64.urlsafe_b64encode(MAGIC[:6]).decode("ascii")


class PayloadTooLarge(Exception):
    """A simulator payload that inflates past MAX_PAYLOAD_BYTES: a decompression bomb, never a payload it wrote."""

    def __init__(self) -> None:
        super().__init__(f"encrypted_content carries a simulator payload that inflates past {MAX_PAYLOAD_BYTES} "
                         "bytes")


def encode(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(MAGIC + zlib.compress(raw, 9)).decode("ascii")


def decode(content: str | None) -> dict[str, Any] | None:
    """The payload of a string `encode` produced; None for anything else (e.g. a real provider's ciphertext).
    Raises PayloadTooLarge for a blob with the marker that inflates past MAX_PAYLOAD_BYTES."""
    if not content or not content.startswith(_PREFIX):
        return None
    try:
        blob = base64.urlsafe_b64decode(content.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    if not blob.startswith(MAGIC):
        return None
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(blob[len(MAGIC) :], MAX_PAYLOAD_BYTES + 1)
    except zlib.error:
        return None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge()
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None
