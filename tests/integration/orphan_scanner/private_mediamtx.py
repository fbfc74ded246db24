"""A private MediaMTX process per test: the real program, with only its Control API on a free loopback port,
so a test controls exactly which paths are configured (the shared stack's MediaMTX is used by other tests)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import httpx

from tests.conftest import REPO_ROOT, free_port

MEDIAMTX_BIN = REPO_ROOT / ".local/bin/mediamtx"
START_TIMEOUT_SECONDS = 15.0
CONFIG = """\
logLevel: warn
logDestinations: [stdout]
api: true
apiAddress: 127.0.0.1:{port}
metrics: false
pprof: false
playback: false
rtsp: false
rtmp: false
hls: false
webrtc: false
srt: false
moq: false
authMethod: internal
authInternalUsers:
  - user: any
    pass:
    ips: ["127.0.0.1", "::1"]
    permissions:
      - action: api
"""
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
        queue = list(names)
        limit = asyncio.Semaphore(concurrency)

        async def one(name: str) -> None:
            async with limit:
                await self.add(name)

        await asyncio.gather(*(one(n) for n in queue))

    async def names(self) -> set[str]:
        response = await self.http.get("/v3/config/paths/list", params={"itemsPerPage": 10000})
        response.raise_for_status()
        return {item["name"] for item in response.json()["items"]}


def _paths_section(names: Iterable[str]) -> str:
    lines = ["paths:"]
    for name in names:
        lines += [f"  {name}:", f"    source: {HAND_MADE_SOURCE}", "    sourceOnDemand: yes"]
    return "\n".join(lines) + "\n" if len(lines) > 1 else ""


@contextlib.asynccontextmanager
async def private_mediamtx(work_dir: Path, preload: Iterable[str] = ()) -> AsyncIterator[PrivateMediaMtx]:
    """`preload`: paths configured from the start (MediaMTX re-applies its whole configuration on every API
    change, so adding a thousand paths one by one takes minutes; a config file takes milliseconds)."""
    port = free_port()
    config = work_dir / "mediamtx.yml"
    config.write_text(CONFIG.format(port=port) + _paths_section(preload))
    log = (work_dir / "mediamtx.log").open("wb")
    process = subprocess.Popen(  # noqa: ASYNC220 - starting a daemon process returns at once
        [str(MEDIAMTX_BIN), str(config)], cwd=work_dir, stdout=log, stderr=log
    )
    server = PrivateMediaMtx(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                (await server.http.get("/v3/config/paths/list")).raise_for_status()
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("private MediaMTX did not start") from None
                await asyncio.sleep(0.05)
        yield server
    finally:
        await server.http.aclose()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
