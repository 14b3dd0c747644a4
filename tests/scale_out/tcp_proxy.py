"""A TCP proxy in front of PostgreSQL that a test can cut: `cut()` closes every connection through it and stops
listening (a new connection is refused, as by a stopped server), `restore()` listens again on the same port.
asyncio on a thread of its own; the processes under test connect to `port` instead of the database's, which comes
from `free_port` (COMPACTWEB_TEST_PORTS when a run is given a range: runs sharing a machine keep to their own)."""

from __future__ import annotations

import asyncio
import threading

from tests.scale_out.processes import free_port


class TcpProxy:
    def __init__(self, *, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        self._thread.start()
        self.restore()
        return self

    def _call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def restore(self) -> None:
        async def listen():
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self._call(listen())

    def cut(self) -> None:
        async def cut():
            if self._server is not None:
                self._server.close()
                self._server = None
            for writer in list(self._writers):
                writer.transport.abort()  # a reset, as a server that went away
            self._writers.clear()
        self._call(cut())

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers.update((client_writer, server_writer))
        await asyncio.gather(self._pipe(client_reader, server_writer), self._pipe(server_reader, client_writer))
        self._writers.discard(client_writer)
        self._writers.discard(server_writer)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort() if writer.transport.is_closing() else writer.close()
