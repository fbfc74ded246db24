"""A private MediaMTX for tests and benchmarks: the real program (`.local/bin/mediamtx`, built by the set-up)
with only its Control API, on a free loopback port, so the caller alone decides which paths are configured.

Paths can be preloaded through the configuration file: MediaMTX re-applies its whole configuration on every
API change, so adding thousands of paths one by one takes minutes, while a config file takes milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import httpx

from yovision_platform.tools.localhost import free_port

__all__ = ["API_ONLY_CONFIG", "mediamtx_sandbox"]

START_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.05
API_ONLY_CONFIG = """\
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


def _config(port: int, preload: Sequence[str], source_for: Callable[[str], str]) -> str:
    lines = [API_ONLY_CONFIG.format(port=port)]
    if preload:
        lines.append("paths:\n")
        for name in preload:
            lines.append(f"  {name}:\n    source: {source_for(name)}\n    sourceOnDemand: yes\n")
    return "".join(lines)


@contextlib.asynccontextmanager
async def mediamtx_sandbox(
    binary: Path,
    work_dir: Path,
    *,
    label: str = "sandbox",
    preload: Sequence[str] = (),
    source_for: Callable[[str], str] = lambda name: f"rtsp://127.0.0.1:1/{name}",
) -> AsyncIterator[str]:
    """Start MediaMTX with `preload` paths configured; yield its API base URL once it lists all of them.
    The process is stopped (TERM, then KILL) on exit; its log is `work_dir/mediamtx-<label>.log`."""
    port = free_port()
    config = work_dir / f"mediamtx-{label}.yml"
    config.write_text(_config(port, preload, source_for))
    url = f"http://127.0.0.1:{port}"
    with (work_dir / f"mediamtx-{label}.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(binary), str(config), cwd=work_dir, stdout=log, stderr=log
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            async with httpx.AsyncClient(base_url=url, timeout=5.0) as http:
                while True:
                    with contextlib.suppress(httpx.HTTPError, ValueError):
                        response = await http.get("/v3/config/paths/list", params={"itemsPerPage": 1})
                        if response.status_code == 200 and response.json().get("itemCount") == len(preload):
                            break
                    if process.returncode is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"MediaMTX sandbox {label} did not start (see its log)")
                    await asyncio.sleep(POLL_SECONDS)
            yield url
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
                except TimeoutError:
                    process.kill()
                    await process.wait()
