"""The simulator's opaque payload decodes within a bound (issue 27): a decompression bomb raises PayloadTooLarge
after inflating at most the bound, never the gigabyte it would become."""

from __future__ import annotations

import base64
import tracemalloc
import zlib
from functools import cache

import pytest

from compaction_app.providers.simulated import codec


@cache
def bomb(inflated: int = 256 * 1024 * 1024) -> str:
    """A payload with the simulator's marker that inflates to `inflated` bytes, built without holding them."""
    deflater, zeros, parts = zlib.compressobj(9), bytes(1024 * 1024), []
    for _ in range(inflated // len(zeros)):
        parts.append(deflater.compress(zeros))
    parts.append(deflater.flush())
    return base64.urlsafe_b64encode(codec.MAGIC + b"".join(parts)).decode("ascii")


def test_what_encode_writes_decodes_back():
    payload = {"kind": "compaction", "summary": "s" * 10_000, "digest": {"goals": ["g"] * 20}}
    assert codec.decode(codec.encode(payload)) == payload


def test_a_bomb_raises_after_inflating_no_more_than_the_bound():
    blob = bomb()
    tracemalloc.start()
    try:
        with pytest.raises(codec.PayloadTooLarge, match="inflates past"):
            codec.decode(blob)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * codec.MAX_PAYLOAD_BYTES + 2 * len(blob)  # the blob, its base64 copy and the bound: no 256 MiB


def test_someone_elses_ciphertext_is_not_decoded():
    assert codec.decode("gAAAAABo-not-ours") is None
    assert codec.decode(base64.urlsafe_b64encode(b"x" * 64).decode()) is None
