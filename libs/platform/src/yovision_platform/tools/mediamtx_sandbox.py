"""A private MediaMTX for tests and benchmarks: the real program (`.local/bin/mediamtx`, built by the set-up)
with only its Control API, on a free loopback port, so the caller alone decides which paths are configured.

The Control API is authenticated, as in the local stack: one user with the `api` permission, whose password
is random per sandbox; MediaMTX's configuration holds only its SHA-256 (MediaMTX's `sha256:` credential
form). The credentials are written to a 0600 file a service can be pointed at (`credentials_file` of a
media server registration). Nobody else may use the API.

Paths can be preloaded through the configuration file: MediaMTX re-applies its whole configuration on every
API change, so adding thousands of paths one by one takes minutes, while a config file takes milliseconds.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import SecretStr

from yovision_platform.mediamtx import MediaMtxCredentials
from yovision_platform.tools.localhost import free_port, write_private_file

__all__ = ["API_ONLY_CONFIG", "MediaMtxSandbox", "mediamtx_sandbox", "sha256_credential"]

START_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.05
API_USER = "yovision-api"
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
  - user: {user}
    pass: {password_hash}
    ips: ["127.0.0.1", "::1"]
    permissions:
      - action: api
"""


def sha256_credential(password: str) -> str:
    """MediaMTX's hashed credential form: ``sha256:`` + base64 of the SHA-256 of the password."""
    return "sha256:" + base64.b64encode(hashlib.sha256(password.encode()).digest()).decode()


@dataclass(frozen=True)
class MediaMtxSandbox:
    url: str
    credentials: MediaMtxCredentials
    credentials_file: Path

    def auth(self) -> httpx.BasicAuth:
        return httpx.BasicAuth(self.credentials.user, self.credentials.password.get_secret_value())


def _config(
    port: int, credentials: MediaMtxCredentials, preload: Sequence[str], source_for: Callable[[str], str]
) -> str:
    password_hash = sha256_credential(credentials.password.get_secret_value())
    lines = [API_ONLY_CONFIG.format(port=port, user=credentials.user, password_hash=password_hash)]
    if preload:
        lines.append("paths:\n")
        for name in preload:
            # JSON strings are YAML: names with "/" or "." stay exactly one key
            lines.append(f"  {json.dumps(name)}:\n    source: {source_for(name)}\n    sourceOnDemand: yes\n")
    return "".join(lines)


@contextlib.asynccontextmanager
async def mediamtx_sandbox(
    binary: Path,
    work_dir: Path,
    *,
    label: str = "sandbox",
    preload: Sequence[str] = (),
    source_for: Callable[[str], str] = lambda name: f"rtsp://127.0.0.1:1/{name}",
) -> AsyncIterator[MediaMtxSandbox]:
    """Start MediaMTX with `preload` paths configured; yield it once it lists all of them. The process is
    stopped (TERM, then KILL) on exit; its log is `work_dir/mediamtx-<label>.log`."""
    port = free_port()
    credentials = MediaMtxCredentials(API_USER, SecretStr(secrets.token_urlsafe(24)))
    credentials_file = write_private_file(
        work_dir / f"mediamtx-{label}.credentials",
        f"{credentials.user}:{credentials.password.get_secret_value()}\n",
    )
    config = work_dir / f"mediamtx-{label}.yml"
    write_private_file(config, _config(port, credentials, preload, source_for))
    sandbox = MediaMtxSandbox(f"http://127.0.0.1:{port}", credentials, credentials_file)
    with (work_dir / f"mediamtx-{label}.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            str(binary), str(config), cwd=work_dir, stdout=log, stderr=log
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            async with httpx.AsyncClient(base_url=sandbox.url, timeout=5.0, auth=sandbox.auth()) as http:
                while True:
                    with contextlib.suppress(httpx.HTTPError, ValueError):
                        response = await http.get("/v3/config/paths/list", params={"itemsPerPage": 1})
                        if response.status_code == 200 and response.json().get("itemCount") == len(preload):
                            break
                    if process.returncode is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"MediaMTX sandbox {label} did not start (see its log)")
                    await asyncio.sleep(POLL_SECONDS)
            yield sandbox
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), STOP_TIMEOUT_SECONDS)
                except TimeoutError:
                    process.kill()
                    await process.wait()
