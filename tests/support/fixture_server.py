"""A local HTTP/1.1 fixture server on 127.0.0.1 with routes that misbehave on purpose.

Routes: /status/<code> (empty body), /body/<n> (n bytes, with Content-Length), /chunked/<n> (n bytes,
chunked, no length), /endless (chunked forever), /hang (headers never sent), /redirect (302),
/json (the value set via `state["json"]`), /text (the value set via `state["text"]`), /echo (the request
head and body as JSON). `requests` counts requests per path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

CHUNK = b"x" * 65536


@dataclass
class FixtureServer:
    port: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    aborted: list[str] = field(default_factory=list)
    _server: asyncio.Server | None = None

    async def start(self) -> FixtureServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        path = target.split("?", 1)[0]
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests[target] += 1
        if path == "/hang":
            await asyncio.sleep(3600)
            return False
        if path == "/redirect":
            await self._send(writer, 302, b"", extra="Location: http://127.0.0.1/\r\n")
        elif path.startswith("/status/"):
            await self._send(writer, int(path.rsplit("/", 1)[1]), b"")
        elif path.startswith("/body/"):
            await self._send(writer, 200, b"x" * int(path.rsplit("/", 1)[1]))
        elif path.startswith("/chunked/") or path == "/endless":
            return await self._stream(writer, path)
        elif path == "/json":
            await self._send(writer, 200, json.dumps(self.state.get("json")).encode())
        elif path == "/text":
            await self._send(
                writer, int(self.state.get("status", 200)), str(self.state.get("text", "")).encode()
            )
        elif path == "/echo":
            echo = {"method": method, "headers": headers, "body": body.decode()}
            await self._send(writer, 200, json.dumps(echo).encode())
        else:
            await self._send(writer, 404, b"")
        return True

    async def _send(self, writer: asyncio.StreamWriter, status: int, body: bytes, extra: str = "") -> None:
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body)
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, path: str) -> bool:
        remaining = -1 if path == "/endless" else int(path.rsplit("/", 1)[1])
        writer.write(b"HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            while remaining != 0:
                piece = CHUNK if remaining < 0 else CHUNK[: min(remaining, len(CHUNK))]
                writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                await writer.drain()
                if remaining > 0:
                    remaining -= len(piece)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            self.aborted.append(path)
            return False
        return True
