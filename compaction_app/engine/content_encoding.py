"""Outbound answers are read uncompressed (issue 27): every decompression in compactweb is bounded, and the one an
HTTP client would do on its own (httpx inflates gzip, deflate, brotli and zstd answers as it reads them, a chunk
at a time with no bound on what one chunk becomes) is not done at all. Provider calls and webhooks ask for
`Accept-Encoding: identity`; an answer that comes compressed anyway is refused before its body is read."""

from __future__ import annotations

from collections.abc import Mapping

ACCEPT_IDENTITY = {"Accept-Encoding": "identity"}


def compressed_encoding(headers: Mapping[str, str]) -> str | None:
    """The answer's Content-Encoding when it is not identity (what must not be inflated), else None."""
    encoding = (headers.get("content-encoding") or "").strip().lower()
    return encoding if encoding not in ("", "identity") else None
