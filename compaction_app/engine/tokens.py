"""Token counting: exact tiktoken counts loaded with no network, and Codex's byte estimator (spec §3.1).

tiktoken downloads its BPE ranks on first use, which fails offline. We build the Encoding from the rank files that
ship with compactweb (`tokenizer_data/`, package data), and take the pattern string and special tokens from
tiktoken's own `openai_public` constructors so they never drift from the installed tiktoken. The data is checked
against the sha256 that tiktoken itself expects.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import threading
import zlib
from collections.abc import Callable
from functools import cache
from json.encoder import c_make_encoder, encode_basestring
from pathlib import Path
from typing import Any

import orjson
import tiktoken
from tiktoken_ext import openai_public

# The encoding compactweb counts with unless a provider names another (Codex's models use o200k_base).
DEFAULT_ENCODING = "o200k_base"
ENCODINGS = (DEFAULT_ENCODING, "cl100k_base")
CODEX_ESTIMATOR = "codex_estimate"
COUNTERS = (*ENCODINGS, CODEX_ESTIMATOR)

# spec §3.1: what an inline image costs in the estimator, and the discount applied to opaque encrypted payloads.
IMAGE_ESTIMATE_BYTES = 7373
ENCRYPTED_CONTENT_DISCOUNT_BYTES = 650


class TokenizerDataMissing(RuntimeError):
    """The BPE data for an encoding is not installed (or does not match the hash tiktoken expects)."""


_load_lock = threading.Lock()


# The rank files ship with compactweb (package data), checked against tiktoken's own hash when read.
DATA_DIR = Path(__file__).resolve().parent / "tokenizer_data"


def _bundled_bpe_path(name: str) -> Path:
    path = DATA_DIR / f"{name}.tiktoken.gz"
    if not path.is_file():
        raise TokenizerDataMissing(
            f"tokenizer data for {name!r} is missing: {path.name} is not in {DATA_DIR} "
            "(compactweb never downloads tokenizer data)"
        )
    return path


# The bundled rank files inflate to under 4 MB (o200k_base 3.6 MB); a file that inflates past this is not one.
MAX_RANKS_BYTES = 32 * 1024 * 1024


def _inflate_bounded(data: bytes, name: str) -> bytes:
    """gzip-decompress at most MAX_RANKS_BYTES: every decompression in the project is bounded (issue 27)."""
    inflater = zlib.decompressobj(wbits=31)  # 31: gzip framing
    raw = inflater.decompress(data, MAX_RANKS_BYTES + 1)
    if len(raw) > MAX_RANKS_BYTES or not inflater.eof:
        raise TokenizerDataMissing(f"tokenizer data for {name!r} inflates past {MAX_RANKS_BYTES} bytes or is cut")
    return raw


def _load_ranks_offline(name: str) -> Callable[..., dict[bytes, int]]:
    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        raw = _inflate_bounded(_bundled_bpe_path(name).read_bytes(), name)
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
    encoding = tiktoken.Encoding(
        name=params["name"],
        pat_str=params["pat_str"],
        mergeable_ranks=params.pop("mergeable_ranks"),
        special_tokens=params["special_tokens"],
    )
    # The Rust core holds its own copy of the ranks; tiktoken keeps the Python dict (200k entries, about 30 MB)
    # only to pickle the Encoding, which compactweb never does. Freed, it is the memory an import's batches reuse
    # instead of growing the process (issue 30: the o200k ranks were most of the import's start-up memory).
    encoding._mergeable_ranks = {}
    return encoding


def approx_token_count(text: str) -> int:
    """Codex's `approx_token_count`: ceil(utf-8 bytes / 4) (spec §3.1)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def approx_tokens_from_bytes(n_bytes: int) -> int:
    return math.ceil(max(0, n_bytes) / 4)


def _encrypted_bytes(encrypted_content: str) -> int:
    return max(0, len(encrypted_content) * 3 // 4 - ENCRYPTED_CONTENT_DISCOUNT_BYTES)


def _compact_encoder() -> Callable[[Any], str]:
    """`json.dumps(value, separators=(",", ":"), ensure_ascii=False)`, built once: `json.dumps` with arguments
    builds a new encoder on every call, which costs half as much again as tokenizing a short item."""
    if c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
        return lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    default = json.JSONEncoder().default
    make = c_make_encoder(None, default, encode_basestring, None, ":", ",", False, False, True)
    return lambda value: "".join(make(value, 0))


_stdlib_item_json = _compact_encoder()


def _item_json(item: Any) -> str:
    """Compact JSON with orjson, about six times faster than the C encoder of `json` (serialising was a tenth of
    exact counting) and, like Codex's serde_json, ryu floats and NaN as null. What orjson refuses (a lone
    surrogate, an integer beyond 64 bits) goes through the `json` encoder, which writes the same for the rest."""
    try:
        return orjson.dumps(item).decode()
    except orjson.JSONEncodeError:
        return _stdlib_item_json(item)


def item_json(item: dict[str, Any]) -> str:
    """The compact JSON serialisation the estimator measures (key order as given, no spaces, UTF-8 kept)."""
    return _item_json(item)


ORIGINAL_IMAGE_PATCH_SIZE = 32
ORIGINAL_IMAGE_MAX_PATCHES = 10_000
IMAGE_OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")
OPAQUE_KINDS = ("compaction", "compaction_summary")


def inline_image_payload(url: Any) -> tuple[str, str] | None:
    """Split an inline image data URL into (the part up to and including the comma, the base64 payload), or None.

    As Codex parses it (spec §3.1): a case-insensitive `data:` scheme, a media type starting `image/`, and a
    `base64` marker among the `;` parameters (`data:image/png;name=a.png;base64,` is an inline image too)."""
    if not isinstance(url, str) or url[:5].lower() != "data:":
        return None
    comma = url.find(",")
    if comma < 0:
        return None
    mime, *params = url[5:comma].split(";")
    if mime[:6].lower() != "image/" or not any(p.lower() == "base64" for p in params):
        return None
    return url[: comma + 1], url[comma + 1:]


def image_dimensions(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF or JPEG from its header, or None when they cannot be read."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24 and data[12:16] == b"IHDR":
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 4 <= len(data):
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(data[i + 2:i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                if i + 9 > len(data):
                    return None
                return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
            i += 2 + length
    return None


def image_estimate_bytes(url: str, detail: Any) -> int:
    """What one inline image costs (spec §3.1): 7373 bytes, or for `detail: "original"` 4 bytes per 32×32 patch
    (at most 10,000 patches) when the payload is an image whose size can be read."""
    if detail != "original":
        return IMAGE_ESTIMATE_BYTES
    split = inline_image_payload(url)
    if split is None:
        return IMAGE_ESTIMATE_BYTES
    try:
        size = image_dimensions(base64.b64decode(split[1], validate=False))
    except ValueError:
        size = None
    if not size or not all(size):
        return IMAGE_ESTIMATE_BYTES
    side = ORIGINAL_IMAGE_PATCH_SIZE
    patches = ((size[0] + side - 1) // side) * ((size[1] + side - 1) // side)
    return min(patches, ORIGINAL_IMAGE_MAX_PATCHES) * 4


def _strip_parts(parts: list[Any]) -> tuple[list[Any], int, int]:
    out, images, cost = [], 0, 0
    for part in parts:
        url = part.get("image_url") if isinstance(part, dict) else None
        split = inline_image_payload(url)
        if split is not None:
            images += 1
            cost += image_estimate_bytes(url, part.get("detail"))
            part = {**part, "image_url": split[0]}
        out.append(part)
    return out, images, cost


def _strip_inline_images(item: dict[str, Any]) -> tuple[dict[str, Any], int, int]:
    """The item with the base64 payloads of its inline images removed (the data URL prefix and the JSON frame
    stay, as in Codex), how many images were found, and the bytes they are charged instead (spec §3.1). Images
    count in a message's `content` and in a tool output whose `output` is a list of content items."""
    key = "output" if item.get("type") in IMAGE_OUTPUT_KINDS else "content"
    parts = item.get(key)
    if not isinstance(parts, list):
        return item, 0, 0
    new_parts, images, cost = _strip_parts(parts)
    if not images:
        return item, 0, 0
    return {**item, key: new_parts}, images, cost


def _opaque_payload(item: dict[str, Any]) -> str | None:
    """The opaque payload the estimator charges by its formula: a compaction item's `encrypted_content`, and a
    reasoning or legacy context_compaction item's when it has one (an empty string included, spec §3.1)."""
    kind = item.get("type")
    content = item.get("encrypted_content")
    if kind in OPAQUE_KINDS:
        return content if isinstance(content, str) else ""
    if kind in ("reasoning", "context_compaction") and isinstance(content, str):
        return content
    return None


def estimate_item_bytes(item: dict[str, Any]) -> int:
    """Model-visible bytes of one item as Codex estimates them (spec §3.1)."""
    opaque = _opaque_payload(item)
    if opaque is not None:
        return _encrypted_bytes(opaque)
    if item.get("type") == "ghost_snapshot":
        return 0
    stripped, _, image_bytes = _strip_inline_images(item)
    return len(item_json(stripped).encode("utf-8")) + image_bytes


def estimate_item_tokens(item: dict[str, Any]) -> int:
    """Codex's per-item estimate: ceil(model-visible bytes / 4) (spec §3.1)."""
    return approx_tokens_from_bytes(estimate_item_bytes(item))


def estimate_history_tokens(items: list[dict[str, Any]], base_instructions: str = "") -> int:
    """Codex's history estimate: base instructions plus the sum of item estimates (spec §3.1)."""
    return approx_token_count(base_instructions) + sum(estimate_item_tokens(i) for i in items)


def model_visible_text(item: dict[str, Any]) -> str:
    """The text a tokenizer should count for an item: its JSON, with opaque payloads and images left out."""
    if _opaque_payload(item) is not None:
        if item.get("type") != "reasoning":
            return ""
        item = {k: v for k, v in item.items() if k != "encrypted_content"}
    stripped, _, _ = _strip_inline_images(item)
    return item_json(stripped)


# Kinds whose model-visible text is not simply their JSON (opaque payloads).
_NOT_PLAIN_KINDS = frozenset({*OPAQUE_KINDS, "reasoning", "context_compaction"})


def _token_counter(encoding: tiktoken.Encoding) -> Callable[[str], int]:
    """How many tokens `encoding` makes of `text` with no special tokens (what `encode_ordinary` gives), without
    building the list of token ids: the Rust tokenizer's buffer entry point hands back the ids as packed 4-byte
    integers, so counting costs no Python int per token. With no special token allowed it encodes exactly as
    `encode_ordinary` does (a special token's text is encoded as ordinary text); tests hold the two equal."""
    core = encoding._core_bpe
    buffer_of = core.encode_to_tiktoken_buffer
    none_allowed: frozenset[str] = frozenset()

    def count(text: str) -> int:
        try:
            return memoryview(buffer_of(text, none_allowed)).nbytes >> 2
        except UnicodeEncodeError:  # lone surrogates: tiktoken's own fallback
            return len(encoding.encode_ordinary(text))

    return count


# Texts at least this long are remembered by content, so the same text is tokenized once per process: the
# dashboard counts each item it appends, and the embedded simulated model counts the same items as the model's
# input (or output), with the same shared counter. Below 128 characters, remembering cost more than it saved on
# texts seen once (bench/bench_simulated_model.py: 0.88x raw tiktoken at 64, 0.91x at 128).
REMEMBER_MIN_CHARS = 128
REMEMBERED_TEXTS = 100_000


class TokenCounter:
    """Counts an item's tokens with one named counter: an exact tiktoken encoding or Codex's estimator."""

    def __init__(self, name: str = DEFAULT_ENCODING, *, remembered: int = REMEMBERED_TEXTS) -> None:
        if name not in COUNTERS:
            raise ValueError(f"unknown token counter {name!r}; choose one of {', '.join(COUNTERS)}")
        self.name = name
        self._encoding = None if name == CODEX_ESTIMATOR else get_encoding(name)
        # The Rust tokenizer's own entry point: tiktoken's wrapper only adds a retry for invalid surrogates.
        self._count_tokens = None if self._encoding is None else _token_counter(self._encoding)
        self._recent: dict[int, int] = {}
        self._older: dict[int, int] = {}
        self._generation = max(1, remembered // 2)

    def count_text(self, text: str) -> int:
        if self._count_tokens is None:
            return approx_token_count(text)
        return self._exact(text)

    def _exact(self, text: str) -> int:
        """Exact tokens of `text`; a long text is looked up by its length and hash first. `hash(str)` is SipHash
        with a per-process random key, computed once per string object and cached in it: two different texts of
        the same length share a key with a chance of about 2**-64, and the lookup costs a few hundredths of
        tokenizing the text. Two generations of at most half the bound each: when the newer fills up it becomes
        the older and the older is forgotten, so the dashboard's database thread and the event loop's simulated
        model share the memory without a lock (a race at worst forgets a generation early)."""
        if len(text) < REMEMBER_MIN_CHARS:
            return self._count_tokens(text)
        # One int, not a (length, hash) tuple: a third of the memory per remembered text (100,000 of them).
        key = (hash(text) << 32) ^ len(text)
        tokens = self._recent.get(key)
        if tokens is None:
            tokens = self._older.get(key)
            if tokens is None:
                tokens = self._count_tokens(text)
            recent = self._recent
            recent[key] = tokens
            if len(recent) >= self._generation:
                self._older, self._recent = recent, {}
        return tokens

    def count_item(self, item: dict[str, Any]) -> int:
        """Tokens of one item. Opaque payloads (compaction, encrypted reasoning) use the estimator's byte rule."""
        return self.count_item_json(item, None)

    def count_item_json(self, item: dict[str, Any], text: str | None) -> int:
        """`count_item`, for a caller that already serialised the item (`text` is `item_json(item)`): a plain item
        (nothing opaque, no image part) is counted from that text, so it is serialised once."""
        if self._count_tokens is None:
            return estimate_item_tokens(item)
        # The plain item (nothing opaque, no image part), nearly every item, is checked inline: this runs once
        # per item appended or sent, and each helper call or generator here cost a share of the tokenizing.
        kind = item.get("type")
        if kind not in _NOT_PLAIN_KINDS:
            parts = item.get("output") if kind in IMAGE_OUTPUT_KINDS else item.get("content")
            plain = True
            if isinstance(parts, list):
                for part in parts:
                    if isinstance(part, dict) and "image_url" in part:
                        plain = False
                        break
            if plain:
                # The model-visible text of a plain item is its JSON.
                return self._exact(_item_json(item) if text is None else text)
        payload = _opaque_payload(item)
        opaque = 0 if payload is None else approx_tokens_from_bytes(_encrypted_bytes(payload))
        _, _, image_bytes = _strip_inline_images(item)
        return self.count_text(model_visible_text(item)) + opaque + approx_tokens_from_bytes(image_bytes)


@cache
def counter(name: str) -> TokenCounter:
    """A shared TokenCounter for `name` (encodings are built once per process)."""
    return TokenCounter(name)
