"""A private MediaMTX per test (`yovision_platform.tools.mediamtx_sandbox`): the real program with only its
Control API on a free loopback port, so a test controls exactly which paths are configured (the shared
stack's MediaMTX is used by other tests)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import httpx

from tests.conftest import REPO_ROOT
from yovision_platform.tools.mediamtx_sandbox import mediamtx_sandbox

MEDIAMTX_BIN = REPO_ROOT / ".local/bin/mediamtx"
# Hand-made paths carry a credential in their source: it must never surface anywhere.
HAND_MADE_SOURCE = "rtsp://admin:hand-made-s3cret@192.0.2.10:554/stream"


class PrivateMediaMtx:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.AsyncClient(base_url=url, timeout=10.0)

    async def add(self, name: str, source: str = HAND_MADE_SOURCE) -> None:
        response = await self.http.post(
            f"/v3/config/paths/add/{name}", json={"source": source, "sourceOnDemand": True}
        )
        response.raise_for_status()

    async def add_many(self, names: Iterable[str], *, concurrency: int = 16) -> None:
        limit = asyncio.Semaphore(concurrency)

        async def one(name: str) -> None:
            async with limit:
                await self.add(name)

        await asyncio.gather(*(one(n) for n in names))

    async def names(self) -> set[str]:
        response = await self.http.get("/v3/config/paths/list", params={"itemsPerPage": 10000})
        response.raise_for_status()
        return {item["name"] for item in response.json()["items"]}


@contextlib.asynccontextmanager
async def private_mediamtx(work_dir: Path, preload: Iterable[str] = ()) -> AsyncIterator[PrivateMediaMtx]:
    """`preload`: paths configured from the start, each with a hand-made (credential-bearing) source."""
    async with mediamtx_sandbox(
        MEDIAMTX_BIN, work_dir, preload=list(preload), source_for=lambda _: HAND_MADE_SOURCE
    ) as url:
        server = PrivateMediaMtx(url)
        try:
            yield server
        finally:
            await server.http.aclose()
