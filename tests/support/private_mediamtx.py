"""A private MediaMTX per test (`yovision_platform.tools.mediamtx_sandbox`): the real program with only its
Control API (authenticated) on a free loopback port, so a test controls exactly which paths are configured
(the shared stack's MediaMTX is used by other tests)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import httpx

from tests.support.stack import MEDIAMTX_BIN
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox, mediamtx_sandbox

# Hand-made paths carry a credential in their source: it must never surface anywhere.
HAND_MADE_SOURCE = "rtsp://admin:hand-made-s3cret@192.0.2.10:554/stream"
VISIBLE_TIMEOUT_SECONDS = 10.0


T = TypeVar("T")


async def read_until(read: Callable[[], Awaitable[T]], settled: Callable[[T], bool]) -> T:
    """`read()` again until `settled(what it read)` or the timeout; returns the last read. MediaMTX applies
    API changes asynchronously: a list right after a change may briefly show the previous set."""
    deadline = time.monotonic() + VISIBLE_TIMEOUT_SECONDS
    while True:
        value = await read()
        if settled(value) or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


class PrivateMediaMtx:
    def __init__(self, sandbox: MediaMtxSandbox) -> None:
        self.sandbox = sandbox
        self.url = sandbox.url
        self.credentials_file = sandbox.credentials_file
        self.http = httpx.AsyncClient(base_url=sandbox.url, timeout=10.0, auth=sandbox.auth())

    async def add(self, name: str, source: str = HAND_MADE_SOURCE) -> None:
        response = await self.http.post(
            f"/v3/config/paths/add/{name}", json={"source": source, "sourceOnDemand": True}
        )
        response.raise_for_status()

    async def add_many(self, names: Iterable[str], *, concurrency: int = 16) -> None:
        """Add concurrently, then wait until the list shows every one: MediaMTX answers an add before its
        reloaded configuration is visible to a concurrent list request."""
        wanted = list(names)
        limit = asyncio.Semaphore(concurrency)

        async def one(name: str) -> None:
            async with limit:
                await self.add(name)

        await asyncio.gather(*(one(n) for n in wanted))
        await self.wait_listed(wanted)

    async def settled(self, expected: set[str]) -> set[str]:
        """The listed names once they equal `expected`, or what is listed after the timeout. MediaMTX applies
        API changes asynchronously: a list right after a change may briefly show the previous set."""
        return await self._listed_when(lambda names: names == expected)

    async def delete(self, name: str) -> None:
        """Delete by hand, then wait until the list no longer shows it."""
        (await self.http.delete(f"/v3/config/paths/delete/{name}")).raise_for_status()
        if name in await self._listed_when(lambda names: name not in names):
            raise AssertionError("a deleted path stayed in MediaMTX's list")

    async def wait_listed(self, names: Iterable[str]) -> None:
        """Until MediaMTX's list shows every one of `names` (added by anyone)."""
        wanted = set(names)
        if not wanted <= await self._listed_when(wanted.issubset):
            raise AssertionError("added paths did not become visible in MediaMTX's list")

    async def _listed_when(self, settled: Callable[[set[str]], bool]) -> set[str]:
        return await read_until(self.names, settled)

    async def names(self) -> set[str]:
        response = await self.http.get("/v3/config/paths/list", params={"itemsPerPage": 10000})
        response.raise_for_status()
        return {item["name"] for item in response.json()["items"]}


@contextlib.asynccontextmanager
async def private_mediamtx(
    work_dir: Path, preload: Iterable[str] = (), *, label: str = "sandbox"
) -> AsyncIterator[PrivateMediaMtx]:
    """`preload`: paths configured from the start, each with a hand-made (credential-bearing) source."""
    async with mediamtx_sandbox(
        MEDIAMTX_BIN, work_dir, label=label, preload=list(preload), source_for=lambda _: HAND_MADE_SOURCE
    ) as sandbox:
        server = PrivateMediaMtx(sandbox)
        try:
            yield server
        finally:
            await server.http.aclose()
