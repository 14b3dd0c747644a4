"""Token counts are exact tiktoken counts built offline, and Codex's estimator is ceil(bytes / 4) (spec §3.1)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from compaction_app.engine import tokens
from compaction_app.engine.tokens import TokenizerDataMissing, counter, get_encoding

# Token ids published by OpenAI for these strings (tiktoken README / cookbook).
KNOWN = [
    ("cl100k_base", "hello world", [15339, 1917]),
    ("cl100k_base", "tiktoken is great!", [83, 1609, 5963, 374, 2294, 0]),
    ("o200k_base", "hello world", [24912, 2375]),
]
SAMPLES = ["", "hello world", "Größe 😀 数据", "def f(x):\n    return x ** 2\n", "  spaces\t\ttabs\n\n", "a" * 3000]


@pytest.mark.parametrize(("name", "text", "ids"), KNOWN)
def test_encodings_give_the_published_token_ids(name, text, ids):
    assert get_encoding(name).encode(text) == ids


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_offline_encodings_match_an_independent_implementation(name):
    import bpe_openai  # an independent BPE implementation shipped with the same data

    reference = bpe_openai.get_encoding(name)
    for text in SAMPLES:
        assert get_encoding(name).encode(text) == reference.encode(text)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_counter_counts_text_exactly(name):
    enc = get_encoding(name)
    for text in SAMPLES:
        assert counter(name).count_text(text) == len(enc.encode(text))


def test_an_item_is_counted_as_the_tokens_of_its_compact_json():
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello world"}]}
    text = '{"type":"message","role":"user","content":[{"type":"input_text","text":"hello world"}]}'
    assert counter("o200k_base").count_item(item) == len(get_encoding("o200k_base").encode(text))


def test_missing_tokenizer_data_names_the_encoding(monkeypatch, tmp_path):
    monkeypatch.setattr(tokens, "DATA_DIR", tmp_path)
    with pytest.raises(TokenizerDataMissing, match="o200k_base"):
        tokens._bundled_bpe_path("o200k_base")


def test_tokens_are_counted_without_bpe_openai_installed():
    """bpe-openai is a dev dependency (the oracle above): production counts from compactweb's own rank files."""
    script = (
        "import sys; sys.modules['bpe_openai'] = None\n"  # as if the package were not installed
        "from compaction_app.engine.tokens import ENCODINGS, get_encoding\n"
        "print([len(get_encoding(n).encode('hello world, compacted')) for n in ENCODINGS])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(tokens.__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str([len(get_encoding(n).encode("hello world, compacted")) for n in tokens.ENCODINGS])


def test_unknown_encoding_is_refused_with_its_name():
    with pytest.raises(ValueError, match="p50k_base"):
        get_encoding("p50k_base")


def test_codex_estimate_of_text_is_ceil_of_utf8_bytes_over_four():
    assert tokens.approx_token_count("") == 0
    assert tokens.approx_token_count("abcd") == 1
    assert tokens.approx_token_count("abcde") == 2
    assert tokens.approx_token_count("Größe") == 2  # 7 bytes (ö and ß are two bytes each)
    assert tokens.approx_token_count("😀") == 1  # 4 bytes


def test_codex_estimate_of_a_message_item_is_its_json_bytes_over_four():
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    # '{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}' is 78 bytes by hand:
    # {"type":"message", 17 + "role":"user", 14 + "content":[ 11 + {"type":"input_text", 20 + "text":"hi"}]} 16
    assert len(tokens.item_json(item).encode()) == 78
    assert counter("codex_estimate").count_item(item) == math.ceil(78 / 4) == 20


def test_codex_estimate_of_a_function_call_output_with_non_ascii_text():
    item = {"type": "function_call_output", "call_id": "c1", "output": "é"}
    raw = '{"type":"function_call_output","call_id":"c1","output":"é"}'
    assert tokens.item_json(item) == raw
    assert tokens.estimate_item_tokens(item) == math.ceil(len(raw.encode()) / 4) == math.ceil(58 / 4)


@pytest.mark.parametrize("text", [*SAMPLES, 'quote " backslash \\ slash /', "controls \x00\x01\x1f\x7f \b\f\n\r\t",
                                  "line sep \u2028 para \u2029", "<script>&amp;</script>"])
def test_item_json_writes_what_compact_json_dumps_writes(text):
    item = {"type": "function_call_output", "call_id": "c1", "output": text, "n": [0, -1, 2**63 - 1, True, None]}
    assert tokens.item_json(item) == json.dumps(item, separators=(",", ":"), ensure_ascii=False)


def test_item_json_serialises_what_orjson_refuses_as_json_does():
    # A lone surrogate (possible in a str decoded with surrogatepass) and an integer beyond 64 bits.
    for value in ["half \ud800 a pair", 2**70]:
        item = {"type": "function_call_output", "call_id": "c1", "output": value}
        assert tokens.item_json(item) == json.dumps(item, separators=(",", ":"), ensure_ascii=False)


def test_codex_estimate_of_encrypted_payloads_uses_three_quarters_minus_650_bytes():
    payload = "A" * 4000  # 3000 decoded bytes - 650 = 2350 bytes -> 588 tokens
    assert tokens.estimate_item_tokens({"type": "compaction", "encrypted_content": payload}) == 588
    assert tokens.estimate_item_tokens({"type": "reasoning", "summary": [], "encrypted_content": payload}) == 588
    assert tokens.estimate_item_tokens({"type": "compaction", "encrypted_content": "A" * 100}) == 0


def test_codex_estimate_charges_a_fixed_7373_bytes_per_inline_image():
    image = "data:image/png;base64," + "Q" * 50_000
    item = {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": image}]}
    stripped = json.dumps(
        {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,"}]},
        separators=(",", ":"),
    )
    assert tokens.estimate_item_tokens(item) == math.ceil((len(stripped) + 7373) / 4)


def test_history_estimate_adds_the_base_instructions():
    items = [{"type": "function_call_output", "call_id": "c", "output": "x"}]
    expected = tokens.approx_token_count("be brief") + tokens.estimate_item_tokens(items[0])
    assert tokens.estimate_history_tokens(items, "be brief") == expected


@pytest.mark.parametrize("name", tokens.ENCODINGS)
@pytest.mark.parametrize("text", [*SAMPLES, "<|endoftext|> and <|endofprompt|>, <|fim_prefix|>x", "<|endoftext",
                                  "lone \ud800 surrogate"])
def test_counting_gives_the_length_of_encode_ordinary_special_token_text_and_surrogates_included(name, text):
    # The counter never builds the id list; its count must still be exactly encode_ordinary's.
    assert tokens.TokenCounter(name).count_text(text) == len(get_encoding(name).encode_ordinary(text))


def _spied(counter_: tokens.TokenCounter) -> list[str]:
    seen: list[str] = []
    count = counter_._count_tokens
    counter_._count_tokens = lambda text: seen.append(text) or count(text)
    return seen


def test_a_long_text_is_tokenized_once_and_a_short_one_every_time():
    counter_ = tokens.TokenCounter("o200k_base")
    seen = _spied(counter_)
    long_text = "ledger entries reconcile nightly " * 20
    item = {"type": "function_call_output", "call_id": "c1", "output": long_text}
    first = [counter_.count_text(long_text), counter_.count_item(item)]
    assert [counter_.count_text(long_text), counter_.count_item(item)] == first
    assert len(seen) == 2  # one text, one item JSON: each tokenized once
    counter_.count_text("short")
    counter_.count_text("short")
    assert seen[2:] == ["short", "short"]  # cheaper to tokenize than to look up
    assert first[0] == len(get_encoding("o200k_base").encode_ordinary(long_text))


def test_remembered_texts_are_bounded_and_told_apart_by_content():
    counter_ = tokens.TokenCounter("o200k_base", remembered=2)
    seen = _spied(counter_)
    a, b, c = ("alpha " * 60), ("beta! " * 60), ("gamma " * 60)  # the same length, different texts
    counts = [counter_.count_text(t) for t in (a, b, c)]
    assert len(seen) == 3  # three texts, three tokenizations: no mix-up by length
    assert counter_.count_text(c) == counts[2] and len(seen) == 3  # remembered
    assert counter_.count_text(a) == counts[0] and len(seen) == 4  # the oldest was forgotten
