"""JSON Lines answers streamed as they are read (the rollout, an export): one schema, one way to stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse

JSON_LINES = "application/x-ndjson"
JSON_LINES_RESPONSES = {(200, JSON_LINES): OpenApiResponse(OpenApiTypes.STR, description="JSON Lines")}


def json_lines_response(
    request,
    *,
    sync_body: Callable[[], Iterator[str]],
    async_body: Callable[[], AsyncIterator[str]],
    disposition: str,
) -> StreamingHttpResponse:
    # Under ASGI (Daphne) the body must be an async iterator, or Django buffers the whole of it before answering.
    body = async_body() if isinstance(request._request, ASGIRequest) else sync_body()
    response = StreamingHttpResponse(body, content_type=JSON_LINES)
    response["Content-Disposition"] = disposition
    return response
