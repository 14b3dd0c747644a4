"""Token counting: exact tiktoken counts loaded with no network, and Codex's byte estimator (spec §3.1).

tiktoken downloads its BPE ranks on first use, which fails offline. We build the Encoding from the ranks that the
`bpe-openai` package ships (located with importlib, never imported: importing it costs seconds and memory), and take
the pattern string and special tokens from tiktoken's own `openai_public` constructors so they never drift from the
installed tiktoken. The data is checked against the sha256 that tiktoken itself expects.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import math
import re
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import tiktoken
from tiktoken_ext import openai_public

ENCODINGS = ("o200k_base", "cl100k_base")
CODEX_ESTIMATOR = "codex_estimate"
COUNTERS = (*ENCODINGS, CODEX_ESTIMATOR)

# spec §3.1: what an inline image costs in the estimator, and the discount applied to opaque encrypted payloads.
IMAGE_ESTIMATE_BYTES = 7373
ENCRYPTED_CONTENT_DISCOUNT_BYTES = 650
_DATA_IMAGE_URL = re.compile(r"^data:image/[A-Za-z0-9.+-]+;base64,", re.IGNORECASE)


class TokenizerDataMissing(RuntimeError):
    """The BPE data for an encoding is not installed (or does not match the hash tiktoken expects)."""


_load_lock = threading.Lock()


def _bundled_bpe_path(name: str) -> Path:
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerDataMissing(
            f"tokenizer data for {name!r} is missing: install the 'bpe-openai' package, which ships "
            f"{name}.tiktoken.gz (compactweb never downloads tokenizer data)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.tiktoken.gz"
    if not path.is_file():
        raise TokenizerDataMissing(f"tokenizer data for {name!r} is missing: {path.name} is not in bpe-openai")
    return path


def _load_ranks_offline(name: str) -> Callable[..., dict[bytes, int]]:
    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        raw = gzip.decompress(_bundled_bpe_path(name).read_bytes())
        if expected_hash and hashlib.sha256(raw).hexdigest() != expected_hash:
            raise TokenizerDataMissing(f"tokenizer data for {name!r} does not match the hash tiktoken expects")
        ranks: dict[bytes, int] = {}
        for line in raw.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    return load


@cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """Return the tiktoken Encoding `name` built from installed data only (no network)."""
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; choose one of {', '.join(ENCODINGS)}")
    constructor = getattr(openai_public, name)
    with _load_lock:
        # The constructor names its download URL and hash; we answer it from the bundled file instead.
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _load_ranks_offline(name)
        try:
            params = constructor()
        finally:
            openai_public.load_tiktoken_bpe = original
    return tiktoken.Encoding(
        name=params["name"],
        pat_str=params["pat_str"],
        mergeable_ranks=params["mergeable_ranks"],
        special_tokens=params["special_tokens"],
    )


def approx_token_count(text: str) -> int:
    """Codex's `approx_token_count`: ceil(utf-8 bytes / 4) (spec §3.1)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def approx_tokens_from_bytes(n_bytes: int) -> int:
    return math.ceil(max(0, n_bytes) / 4)


def _encrypted_bytes(encrypted_content: str) -> int:
    return max(0, len(encrypted_content) * 3 // 4 - ENCRYPTED_CONTENT_DISCOUNT_BYTES)


def item_json(item: dict[str, Any]) -> str:
    """The compact JSON serialisation the estimator measures (key order as given, no spaces, UTF-8 kept)."""
    return json.dumps(item, separators=(",", ":"), ensure_ascii=False)


def _strip_inline_images(item: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Replace base64 payloads of inline images by nothing and return how many images were found."""
    content = item.get("content")
    if not isinstance(content, list):
        return item, 0
    images = 0
    new_parts = []
    for part in content:
        url = part.get("image_url") if isinstance(part, dict) else None
        if isinstance(url, str) and _DATA_IMAGE_URL.match(url):
            images += 1
            prefix = _DATA_IMAGE_URL.match(url).group(0)
            part = {**part, "image_url": prefix}
        new_parts.append(part)
    if not images:
        return item, 0
    return {**item, "content": new_parts}, images


def estimate_item_bytes(item: dict[str, Any]) -> int:
    """Model-visible bytes of one item as Codex estimates them (spec §3.1)."""
    kind = item.get("type")
    if kind in ("compaction", "compaction_summary", "context_compaction"):
        return _encrypted_bytes(item.get("encrypted_content") or "")
    if kind == "reasoning" and item.get("encrypted_content"):
        return _encrypted_bytes(item["encrypted_content"])
    if kind == "ghost_snapshot":
        return 0
    stripped, images = _strip_inline_images(item)
    return len(item_json(stripped).encode("utf-8")) + images * IMAGE_ESTIMATE_BYTES


def estimate_item_tokens(item: dict[str, Any]) -> int:
    """Codex's per-item estimate: ceil(model-visible bytes / 4) (spec §3.1)."""
    return approx_tokens_from_bytes(estimate_item_bytes(item))


def estimate_history_tokens(items: list[dict[str, Any]], base_instructions: str = "") -> int:
    """Codex's history estimate: base instructions plus the sum of item estimates (spec §3.1)."""
    return approx_token_count(base_instructions) + sum(estimate_item_tokens(i) for i in items)


def model_visible_text(item: dict[str, Any]) -> str:
    """The text a tokenizer should count for an item: its JSON, with opaque payloads and images left out."""
    kind = item.get("type")
    if kind in ("compaction", "compaction_summary", "context_compaction"):
        return ""
    if kind == "reasoning" and item.get("encrypted_content"):
        item = {k: v for k, v in item.items() if k != "encrypted_content"}
    stripped, _ = _strip_inline_images(item)
    return item_json(stripped)


class TokenCounter:
    """Counts an item's tokens with one named counter: an exact tiktoken encoding or Codex's estimator."""

    def __init__(self, name: str = "o200k_base") -> None:
        if name not in COUNTERS:
            raise ValueError(f"unknown token counter {name!r}; choose one of {', '.join(COUNTERS)}")
        self.name = name
        self._encoding = None if name == CODEX_ESTIMATOR else get_encoding(name)

    def count_text(self, text: str) -> int:
        if self._encoding is None:
            return approx_token_count(text)
        return len(self._encoding.encode_ordinary(text))

    def count_item(self, item: dict[str, Any]) -> int:
        """Tokens of one item. Opaque payloads (compaction, encrypted reasoning) use the estimator's byte rule."""
        if self._encoding is None:
            return estimate_item_tokens(item)
        kind = item.get("type")
        opaque = 0
        if kind in ("compaction", "compaction_summary", "context_compaction") or (
            kind == "reasoning" and item.get("encrypted_content")
        ):
            opaque = approx_tokens_from_bytes(_encrypted_bytes(item.get("encrypted_content") or ""))
        _, images = _strip_inline_images(item)
        return self.count_text(model_visible_text(item)) + opaque + approx_tokens_from_bytes(
            images * IMAGE_ESTIMATE_BYTES
        )


@cache
def counter(name: str) -> TokenCounter:
    """A shared TokenCounter for `name` (encodings are built once per process)."""
    return TokenCounter(name)
