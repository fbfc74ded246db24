"""A TCP forwarder on a free loopback port that a test can cut and restore, to take a dependency away from a
real service process (PostgreSQL here) without touching the shared server.

`cut()` closes the listening socket and every forwarded connection, so the process sees its connections
reset and new ones refused, as when the server is stopped; `restore()` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from tests.support.stack import free_port

CHUNK_BYTES = 64 * 1024


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def restore(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._forward, "127.0.0.1", self.port, reuse_address=True
            )

    async def cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        if server is not None:
            await server.wait_closed()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[TcpProxy]:
        await self.restore()
        try:
            yield self
        finally:
            await self.cut()

    async def _forward(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        self._writers |= {client_writer, upstream_writer}
        await asyncio.gather(
            self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer)
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(CHUNK_BYTES):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
