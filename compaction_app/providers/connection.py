"""One provider's HTTP connection: base URL, headers, timeouts and the API key, on an httpx.AsyncClient.

The key is read from the environment once (when the connection is built) and kept only inside this object, wrapped
so that no repr, log line or exception message shows it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Self

import httpx

from compaction_app.engine.content_encoding import ACCEPT_IDENTITY, compressed_encoding
from compaction_app.engine.history_snapshot import HistorySnapshot, as_list
from compaction_app.engine.provider_errors import ErrorKind, ProviderError
from compaction_app.providers.classify import error_from_status, error_from_transport, redact
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.in_process import BODY_EXTENSION, InProcessTransport

logger = logging.getLogger(__name__)

# The embedded provider is reached in-process; httpx still wants an absolute URL.
EMBEDDED_BASE_URL = "http://embedded.invalid/v1"


class _Secret:
    """A string that never prints itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    def reveal(self) -> str | None:
        return self._value

    def __repr__(self) -> str:
        return "_Secret(***)" if self._value else "_Secret(None)"

    __str__ = __repr__


class Connection:
    """POSTs JSON to `{base_url}/<path>` and turns every failure into a classified, key-free ProviderError."""

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.base_url = EMBEDDED_BASE_URL if config.is_embedded else config.base_url.rstrip("/")
        self._key = _Secret(config.api_key())
        self._env_headers = {name: _Secret(value) for name, value in config.env_headers().items()}
        timeout = httpx.Timeout(config.read_timeout, connect=config.connect_timeout)
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout)
        self._in_process_transport = transport if isinstance(transport, InProcessTransport) else None

    def __repr__(self) -> str:
        return f"Connection(provider={self.config.name!r}, base_url={self.base_url!r})"

    def headers(self, *, accept: str) -> dict[str, str]:
        headers = {"Accept": accept, **self.config.extra_headers, **ACCEPT_IDENTITY}
        headers.update({name: value.reveal() or "" for name, value in self._env_headers.items()})
        key = self._key.reveal()
        if key and self.config.wire_api == "anthropic":  # Anthropic's API takes its key in x-api-key
            headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
        elif key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    async def _send(self, url: str, *, headers: dict[str, str], body: dict[str, Any], stream: bool) -> httpx.Response:
        """POST `body` as JSON; to an app in this process, hand it over as is, straight to the transport.

        The client's own layers (cookie jar, auth flow, redirects, merging its defaults into every request) cost
        as much per request as the embedded model's work and do nothing for an app in the same process, which
        sets no cookie and never redirects; the request is still an HTTP request to the app (method, URL,
        headers) and its answer an HTTP response (status, headers, streamed body)."""
        if self.config.refused:
            raise ProviderError(kind=ErrorKind.INVALID_REQUEST,
                                message=f"the deployment does not send requests to this provider: {self.config.refused}")
        if self._in_process_transport is not None:
            request = httpx.Request("POST", url, headers=headers, extensions={BODY_EXTENSION: body})
            response = await self._in_process_transport.handle_async_request(request)
            response.request = request
            if not stream:
                await response.aread()
            return response
        if isinstance(body.get("input"), HistorySnapshot):
            body = {**body, "input": as_list(body["input"])}
        response = await self._http.send(self._http.build_request("POST", url, headers=headers, json=body), stream=True)
        encoding = compressed_encoding(response.headers)
        if encoding is not None:  # never inflated: a compressed answer can be a bomb (engine/content_encoding)
            await response.aclose()
            raise self.fail(ProviderError(ErrorKind.BAD_RESPONSE, f"the provider answered with Content-Encoding "
                                          f"{encoding[:40]!r}; only uncompressed answers are read",
                                          http_status=response.status_code))
        if not stream:
            await response.aread()
        return response

    def fail(self, error: ProviderError) -> ProviderError:
        """Strip the key from an error before it leaves the connection."""
        return redact(error, self._key.reveal())

    async def _post(self, path: str, body: dict[str, Any], *, accept: str, stream: bool) -> httpx.Response:
        url = self.url(path)
        logger.debug("POST %s%s (provider %s)", url, " stream" if stream else "", self.config.name)
        response = await self._send(
            url, headers={**self.headers(accept=accept), "Content-Type": "application/json"}, body=body, stream=stream
        )
        logger.debug("POST %s -> %s", url, response.status_code)
        return response

    async def post_json(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST and return a 2xx response (body read); raise a classified ProviderError otherwise."""
        try:
            response = await self._post(path, body, accept="application/json", stream=False)
        except httpx.TransportError as exc:
            raise self.fail(error_from_transport(exc)) from None
        if not response.is_success:
            raise self.fail(error_from_status(response.status_code, response.content, response.headers))
        return response

    @asynccontextmanager
    async def stream_post(self, path: str, body: dict[str, Any]) -> AsyncIterator[httpx.Response]:
        """POST with a streamed answer; yields a 2xx response whose body is still to be read."""
        try:
            response = await self._post(path, body, accept="text/event-stream", stream=True)
            try:
                if not response.is_success:
                    content = await response.aread()
                    raise self.fail(error_from_status(response.status_code, content, response.headers))
                yield response
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise self.fail(error_from_transport(exc)) from None

    async def aclose(self) -> None:
        await self._http.aclose()


class ConnectedClient:
    """What every HTTP ModelClient does around its Connection: a repr that names the provider (never the key),
    closing, and `async with`."""

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.model = config.model
        self._conn = Connection(config, transport=transport)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(provider={self.config.name!r}, model={self.model!r}, "
                f"base_url={self._conn.base_url!r})")

    async def aclose(self) -> None:
        await self._conn.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
