"""Images and opaque payloads in the token estimate (spec §3.1), in both counters: the bytes/4 estimator and
tiktoken. An inline image is charged a fixed estimate wherever Codex finds one (a message's content or a tool
output's content items), `detail: "original"` by 32×32 patches, never by its base64 payload."""

from __future__ import annotations

import base64
import json
import math
import struct

import pytest

from compaction_app.engine import tokens
from compaction_app.engine.tokens import counter

COUNTERS = ["codex_estimate", "o200k_base", "cl100k_base"]


def png(width: int, height: int, padding: int = 0) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0" + b"\x07" * padding


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\0" * 8


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + b"\x01\x01\0\0\x01\0\x01\0\0"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\0"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def data_url(raw: bytes, mime: str = "image/png", params: str = "") -> str:
    return f"data:{mime}{params};base64,{base64.b64encode(raw).decode()}"


SCREENSHOT = data_url(png(1280, 800, padding=300_000))  # a 400 kB payload


def tool_output(url: str, kind: str = "function_call_output", detail: str | None = None) -> dict:
    part = {"type": "input_image", "image_url": url, **({"detail": detail} if detail else {})}
    return {"type": kind, "call_id": "c1", "output": [{"type": "input_text", "text": "screenshot:"}, part]}


@pytest.mark.parametrize("name", COUNTERS)
@pytest.mark.parametrize("kind", ["function_call_output", "custom_tool_call_output"])
def test_an_inline_image_in_a_tool_output_costs_the_fixed_estimate_not_its_payload(name, kind):
    item = tool_output(SCREENSHOT, kind)
    count = counter(name).count_item(item)

    assert math.ceil(7373 / 4) <= count < math.ceil(7373 / 4) + 60  # the estimate plus the JSON frame


def test_the_estimator_charges_a_tool_output_image_like_codex():
    item = tool_output(SCREENSHOT)
    frame = json.dumps({**item, "output": [item["output"][0], {"type": "input_image",
                                                                "image_url": "data:image/png;base64,"}]},
                       separators=(",", ":"))
    assert tokens.estimate_item_tokens(item) == math.ceil((len(frame) + 7373) / 4)


@pytest.mark.parametrize(("raw", "patches"), [
    (png(1280, 800), 40 * 25), (png(33, 1), 2), (gif(64, 64), 4), (jpeg(320, 200), 10 * 7),
    (png(10_000, 10_000), 10_000),  # capped at 10,000 patches
])
def test_an_original_detail_image_is_charged_one_token_per_32px_patch(raw, patches):
    mime = {b"\x89P": "image/png", b"GI": "image/gif", b"\xff\xd8": "image/jpeg"}[raw[:2]]
    assert tokens.image_estimate_bytes(data_url(raw, mime), "original") == patches * 4


def test_an_original_detail_image_whose_size_cannot_be_read_costs_the_fixed_estimate():
    assert tokens.image_estimate_bytes(data_url(b"not an image"), "original") == 7373
    assert tokens.image_estimate_bytes(data_url(png(64, 64)), "high") == 7373


@pytest.mark.parametrize("name", COUNTERS)
def test_original_detail_in_a_message_uses_the_patch_rule_in_every_counter(name):
    url = data_url(png(64, 32, padding=50_000))
    item = {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": url,
                                                             "detail": "original"}]}
    count = counter(name).count_item(item)
    assert 2 <= count < 60  # 2 patches, plus the JSON frame


@pytest.mark.parametrize("url", [
    "data:image/png;name=shot.png;base64,", "DATA:IMAGE/PNG;BASE64,", "data:image/jpeg;charset=x;Base64,",
])
def test_a_data_url_with_parameters_before_base64_is_an_inline_image(url):
    payload = "Q" * 40_000
    assert tokens.inline_image_payload(url + payload) == (url, payload)
    item = {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": url + payload}]}
    assert tokens.estimate_item_tokens(item) < 2_000


@pytest.mark.parametrize("url", ["data:text/plain;base64,QUJD", "data:image/png,QUJD", "https://x/y.png"])
def test_other_urls_are_counted_as_they_are(url):
    assert tokens.inline_image_payload(url) is None


def test_an_empty_encrypted_content_costs_what_codex_formula_gives():
    assert tokens.estimate_item_tokens({"type": "reasoning", "summary": [{"type": "summary_text", "text": "x" * 400}],
                                        "encrypted_content": ""}) == 0
    assert tokens.estimate_item_tokens({"type": "compaction", "encrypted_content": ""}) == 0
    # A legacy context_compaction without a payload is counted by its JSON.
    assert tokens.estimate_item_tokens({"type": "context_compaction"}) == math.ceil(len('{"type":"context_compaction"}') / 4)
