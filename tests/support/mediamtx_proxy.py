"""A recording proxy in front of the real MediaMTX API, for tests that count one process's calls.

With `hold_next()` armed, the next request is parked (not forwarded) until `release_with_404()`. A DELETE of a
name in `refuse_deletes` is answered 500 without reaching MediaMTX (a refused delete)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import uvicorn
from fastapi import FastAPI, Request, Response

from yovision_platform.tools.localhost import free_port


class MediaMtxProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.calls: list[tuple[str, str]] = []
        self.refuse_deletes: set[str] = set()
        self.held = asyncio.Event()
        self._hold = False
        self._release = asyncio.Event()
        self.port = free_port()
        self.app = FastAPI()
        self.app.add_api_route("/{path:path}", self._handle, methods=["GET", "POST", "DELETE", "PATCH"])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold_next(self) -> None:
        self._hold = True

    def release_with_404(self) -> None:
        self._release.set()

    async def _handle(self, path: str, request: Request) -> Response:
        self.calls.append((request.method, path))
        if request.method == "DELETE" and path.rpartition("/")[2] in self.refuse_deletes:
            return Response(status_code=500, content=b'{"status":"error","error":"refused by the test"}')
        if self._hold:
            self._hold = False
            self.held.set()
            await self._release.wait()
            return Response(
                status_code=404, content=b'{"status":"error","error":"path configuration not found"}'
            )
        async with httpx.AsyncClient(base_url=self.upstream) as client:
            upstream = await client.request(
                request.method,
                "/" + path,
                params=request.query_params,
                content=await request.body(),
                headers={
                    "content-type": request.headers.get("content-type", "application/json"),
                    # the API credentials of the caller, passed on (the stack's API is authenticated)
                    **({"authorization": auth} if (auth := request.headers.get("authorization")) else {}),
                },
            )
        return Response(status_code=upstream.status_code, content=upstream.content)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MediaMtxProxy]:
        server = uvicorn.Server(uvicorn.Config(self.app, port=self.port, log_config=None, lifespan="off"))
        task = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes only a flag
            await asyncio.sleep(0.05)
        try:
            yield self
        finally:
            self._release.set()
            server.should_exit = True
            await task
