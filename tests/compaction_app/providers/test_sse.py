"""The server-sent events parser."""

from __future__ import annotations

import pytest

from compaction_app.providers.sse import ServerSentEvent, aiter_sse, encode_sse, iter_sse


def test_multi_line_data_is_joined_with_newlines_and_event_names_kept():
    events = list(iter_sse(["event: greet\ndata: line one\ndata: line two\n\n"]))
    assert events == [ServerSentEvent(data="line one\nline two", event="greet")]


def test_comments_and_events_without_data_are_dropped():
    events = list(iter_sse([": keep-alive\n\nevent: empty\n\ndata: x\n\n"]))
    assert [e.data for e in events] == ["x"]
    assert events[0].event == "message"


def test_chunks_split_anywhere_and_crlf_line_endings_parse_the_same():
    text = "event: a\r\ndata: {\"k\": 1}\r\n\r\ndata: second\r\n\r\n"
    whole = list(iter_sse([text]))
    split = list(iter_sse([text[i : i + 3] for i in range(0, len(text), 3)]))
    assert whole == split == [ServerSentEvent(data='{"k": 1}', event="a"), ServerSentEvent(data="second")]


def test_an_event_cut_off_by_the_end_of_the_stream_is_not_dispatched():
    assert [e.data for e in iter_sse(["data: complete\n\ndata: trunc"])] == ["complete"]


def test_id_and_retry_fields_and_value_without_leading_space():
    (event,) = iter_sse(["id: 7\nretry: 1500\ndata:tight\n\n"])
    assert (event.id, event.retry, event.data) == ("7", 1500, "tight")


def test_encode_sse_round_trips_multi_line_data():
    raw = encode_sse("a\nb", event="x").decode()
    assert list(iter_sse([raw])) == [ServerSentEvent(data="a\nb", event="x")]


@pytest.mark.asyncio
async def test_async_parser_reads_lines():
    async def lines():
        for line in ["event: e", "data: 1", "", ": comment", "data: 2", ""]:
            yield line

    assert [(e.event, e.data) async for e in aiter_sse(lines())] == [("e", "1"), ("message", "2")]
