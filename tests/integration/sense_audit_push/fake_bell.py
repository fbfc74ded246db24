"""A tiny local HTTP server standing in for Bell where a test needs what Bell never does on its own: a 500,
a hang, a response with missing items, or forwarding to the real Bell while watching the traffic.

One request per connection (``Connection: close``). ``handler(number, body, headers)`` returns
``(status, body)``; it may sleep (a hang) for as long as the test wants.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

import httpx

Handler = Callable[[int, bytes, dict[str, str]], Awaitable[tuple[int, bytes]]]
HTTP_REASONS = {200: "OK", 401: "Unauthorized", 500: "Internal Server Error"}


class FakeBell:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests = 0
        self.bodies: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests += 1
            self.bodies.append(body)
            status, payload = await self.handler(self.requests, body, headers)
            writer.write(
                f"HTTP/1.1 {status} {HTTP_REASONS.get(status, 'Status')}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                "connection: close\r\n\r\n".encode("latin-1")
                + payload
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)


def status_only(status: int) -> Handler:
    async def handler(number: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        return status, json.dumps({"error": "unavailable"}).encode()

    return handler


def hang(seconds: float) -> Handler:
    async def handler(number: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        await asyncio.sleep(seconds)
        return 500, b"{}"

    return handler


def missing_items() -> Handler:
    """200 with a well-formed BatchResult that answers all but the last item."""

    async def handler(number: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        items = json.loads(body)["items"]
        results = [
            {"index": i, "status": "accepted", "event_id": item["event_id"], "code": None}
            for i, item in enumerate(items[:-1])
        ]
        return 200, json.dumps({"contract": "sense-audit-relay-v1", "results": results}).encode()

    return handler


async def forward(upstream: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """Send the signed request unchanged to the real Bell and return its answer."""
    keep = {name: value for name, value in headers.items() if name.startswith("x-yovision-")}
    async with httpx.AsyncClient(base_url=upstream, timeout=10) as http:
        response = await http.post(
            "/internal/v1/audit-events:batch",
            content=body,
            headers={**keep, "content-type": "application/json"},
        )
    return response.status_code, response.content
