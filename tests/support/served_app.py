"""An ASGI app served by a real uvicorn inside the test's event loop: real sockets, so body limits,
chunked bodies, stalls and client disconnects happen on the wire."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import uvicorn
from fastapi import FastAPI

from yovision_platform.tools.localhost import free_port

__all__ = ["serve_app"]

START_TIMEOUT_SECONDS = 10.0


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_app(app: FastAPI) -> AsyncIterator[int]:
    """Serve `app` on 127.0.0.1; yields the port. Stops the server (and waits for it) on exit."""
    port = free_port()
    server = _Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False, lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(START_TIMEOUT_SECONDS):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield port
    finally:
        server.should_exit = True
        await task
