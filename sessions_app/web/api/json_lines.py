"""JSON Lines answers streamed as they are read (the rollout, an export): one schema, one way to stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse

JSON_LINES = "application/x-ndjson"
JSON_LINES_RESPONSES = {(200, JSON_LINES): OpenApiResponse(OpenApiTypes.STR, description="JSON Lines")}


def json_lines_response(request, *, pieces: Iterator[str], filename: str, as_attachment: bool
                        ) -> StreamingHttpResponse:
    """Stream `pieces`, each some whole lines, as they are read: `pieces` may read the database as it goes. The
    Content-Disposition is Django's (`content_disposition_header`): a name with a quote, CR/LF or non-ASCII text
    is sent encoded (RFC 6266 `filename*`), never as header text of its own."""
    # Under ASGI (Daphne) the body must be an async iterator, or Django buffers the whole of it before answering.
    body = _stepped_in_sync_thread(pieces) if isinstance(request._request, ASGIRequest) else pieces
    response = StreamingHttpResponse(body, content_type=JSON_LINES)
    response["Content-Disposition"] = content_disposition_header(as_attachment, filename)
    return response


async def _stepped_in_sync_thread(pieces: Iterator[str]) -> AsyncIterator[str]:
    # Each step reads the database: it runs in the one thread Django's sync code uses.
    step = sync_to_async(next, thread_sensitive=True)
    while (piece := await step(pieces, None)) is not None:
        yield piece
