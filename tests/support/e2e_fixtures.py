"""The end-to-end suite: the five services as real processes, driven only through public interfaces.

One environment for the whole session (`yovision_platform.tools.environment`): the services are started
by `infra/scripts/services.sh` with env files made by `devsecrets`, exactly as `make up` does, in their own
schemas, under their own Kafka prefix, on free ports and with a private MediaMTX; they share the run's
PostgreSQL cluster and Kafka broker. Flows talk to the HTTP APIs, the `sense-orphan` CLI, Kafka topics
and the MediaMTX API. The database is only read, to check invariants.

After every test the doctor (`make doctor`) must find the environment healthy: no dead letter anywhere,
every outbox drained, no consumer lag, and no secret in any log, metric, Kafka message or span; every HTTP
response the test received is checked for secrets too. The services send their spans to the environment's
own Jaeger (`traced=True`), as `make up`'s send theirs to the stack's.

Operator settings that differ from `make up` (and why):
- `SIGNAL_PROBE_ALLOWED_NETWORKS=127.0.0.1/32`: the watcher target is a local HTTP server; the SSRF guard
  refuses loopback unless an operator allows it.
- `SIGNAL_PROBE_ONLY_NETWORKS=127.0.0.0/8,::1/128` (`TEST_SETTINGS`, which every environment of
  `local_environment` gets anyway): no probe of a flow or of the fuzzing may leave the machine; any other
  address, public ones included, is refused before a connection (`probe_network_confined`).
- `CONSOLE_JAEGER_URL`: the query API of the session's private Jaeger (`jaeger`), so the console's trace
  pages and links are on, as in `make up`.
- `SENSE_DRIFT_CHECK_SECONDS=0`: the orphan flow stages a leftover path by hand; the drift check, which
  would repair it at an arbitrary moment, has its own tests (tests/integration/sense_reconciler).
- Tracing at the services' default sampling (one new trace in a hundred), as in production, so the suite
  pays what production pays; a flow that follows a trace sends a sampled `traceparent`, as a client would,
  and every service continues it. `SIGNAL_TRACING_SAMPLING_RATIO=1.0`: a check starts its own trace.

The environment has three MediaMTX servers, `mtx-a` (the default of new sites), `mtx-b` and `mtx-c`, each
with an authenticated Control API; the flows that do not move a site run on `mtx-a`, and `mtx-c` is the
refusal flow's own (it changes the server's path defaults, which every path of the server must satisfy).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest

from tests.support.stack import Stack
from yovision_platform.tools.devtoken import user_access_token
from yovision_platform.tools.doctor import Finding, Report, examine_until_settled
from yovision_platform.tools.environment import TEST_SETTINGS, LocalEnvironment, local_environment
from yovision_platform.tools.jaeger import PrivateJaeger

MEDIA_SERVERS = ("mtx-a", "mtx-b", "mtx-c")
# A key the issuer removed stops verifying within 10 s, not the default 300 s (tests/e2e/test_identity.py).
API_PREFIXES = ("SENSE_", "ORPHAN_", "BELL_", "SIGNAL_", "MEDIA_")
JWKS_REFRESH = {f"{prefix}AUTH_JWKS_REFRESH_SECONDS": "10" for prefix in API_PREFIXES}
E2E_SETTINGS = {
    **TEST_SETTINGS,
    **JWKS_REFRESH,
    "SIGNAL_PROBE_ALLOWED_NETWORKS": "127.0.0.1/32",
    # Every check a trace: a check starts its own (no caller), and the watcher flow follows one.
    "SIGNAL_TRACING_SAMPLING_RATIO": "1.0",
    "SENSE_DRIFT_CHECK_SECONDS": "0",
}
SETTLE_SECONDS = 90.0
FLOW_TIMEOUT_SECONDS = 60.0
POLL_SECONDS = 0.2
# The user the API flows act as on Sense: every change they make is audited under this `sub`.
SENSE_OPERATOR = "e2e-operator"
SENSE_PERMISSIONS = ("sense:operate", "sense:read")

T = TypeVar("T")

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
async def env(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalEnvironment]:
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    root = tmp_path_factory.mktemp("e2e-env")
    async with local_environment(
        root, name, settings=E2E_SETTINGS, media_servers=MEDIA_SERVERS, traced=True
    ) as environment:
        yield environment


@pytest.fixture(scope="session")
def jaeger(env: LocalEnvironment) -> PrivateJaeger:
    """The environment's private Jaeger: every service's spans, and the one the console's trace pages read."""
    assert env.jaeger is not None
    return env.jaeger


@dataclass
class Witness:
    """What the run must never leak (credentials the flows chose, tokens they minted) and every HTTP
    response the flows received, checked after each test."""

    secrets: set[str] = field(default_factory=set)
    responses: list[bytes] = field(default_factory=list)
    planted: dict[tuple[str, str], int] = field(default_factory=dict)

    def plant_dead_letter(self, service: str, detail: str) -> None:
        """A test put a dead letter there on purpose: the health check after each test allows exactly it."""
        self.planted[(service, detail)] = self.planted.get((service, detail), 0) + 1

    def unexpected(self, findings: list[Finding]) -> list[Finding]:
        return [
            f
            for f in findings
            if not (
                f.check == "dead_letters"
                and any(
                    f.where.startswith(service) and f.detail.endswith(detail) and f.count == count
                    for (service, detail), count in self.planted.items()
                )
            )
        ]

    async def record(self, response: httpx.Response) -> None:
        await response.aread()
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items()).encode()
        self.responses.append(headers + b"\n" + response.content)

    def leaks_in_responses(self) -> list[str]:
        return sorted(
            f"a response holds a secret of {len(s)} chars"
            for s in self.secrets
            for r in self.responses
            if s.encode() in r
        )


@pytest.fixture(scope="session")
def witness() -> Witness:
    return Witness()


async def settled(env: LocalEnvironment, witness: Witness) -> None:
    """Wait until every outbox is drained and every consumer caught up, then require a healthy system.

    A count of effects ("exactly one") is only final once this holds: before it, a second copy could
    still be on its way."""
    report = await examine_until_settled(env.root, wait_seconds=SETTLE_SECONDS, extra_secrets=witness.secrets)
    unexpected = witness.unexpected(report.findings)
    assert not unexpected, Report(unexpected).text()
    assert not witness.leaks_in_responses()


@pytest.fixture(autouse=True)
async def healthy_after_each_flow(env: LocalEnvironment, witness: Witness) -> AsyncIterator[None]:
    yield
    await settled(env, witness)


def client(base_url: str, witness: Witness, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=base_url, headers=headers or {}, timeout=20.0, event_hooks={"response": [witness.record]}
    )


@pytest.fixture
async def sense(env: LocalEnvironment, witness: Witness) -> AsyncIterator[httpx.AsyncClient]:
    """Sense's Control API as `SENSE_OPERATOR`, signed in at the environment's OpenID provider."""
    token = await user_token(env, "sense-reconciler", SENSE_OPERATOR, *SENSE_PERMISSIONS)
    witness.secrets.add(token)
    async with client(env.url("sense-reconciler"), witness, {"Authorization": f"Bearer {token}"}) as http:
        yield http


def mediamtx_client(env: LocalEnvironment, server: str) -> httpx.AsyncClient:
    """One MediaMTX server's Control API, with its API credentials (not recorded: path sources carry the
    cameras' credentials)."""
    sandbox = env.media_servers[server]
    return httpx.AsyncClient(base_url=sandbox.url, timeout=10.0, auth=sandbox.auth())


@pytest.fixture
async def mediamtx(env: LocalEnvironment) -> AsyncIterator[httpx.AsyncClient]:
    """The default MediaMTX server (`mtx-a`)."""
    async with mediamtx_client(env, MEDIA_SERVERS[0]) as http:
        yield http


@pytest.fixture
async def mediamtx_b(env: LocalEnvironment) -> AsyncIterator[httpx.AsyncClient]:
    """The second MediaMTX server (`mtx-b`)."""
    async with mediamtx_client(env, MEDIA_SERVERS[1]) as http:
        yield http


async def user_token(env: LocalEnvironment, service: str, subject: str, *permissions: str) -> str:
    """`subject`'s access token for `service`, signed in at the environment's own Hydra as `make dev-token`
    signs in (authorization code with PKCE, login and consent accepted for the permissions asked)."""
    return await user_access_token(env.root, subject, permissions, [service])


@pytest.fixture
async def admin_db(env: LocalEnvironment) -> AsyncIterator[asyncpg.Connection]:
    """A read-only admin connection, for invariant checks only."""
    conn = await asyncpg.connect(env.stack.admin_dsn)
    try:
        await conn.execute("SET default_transaction_read_only = on")
        yield conn
    finally:
        await conn.close()


async def eventually(
    check: Callable[[], Awaitable[T | None]], *, within: float = FLOW_TIMEOUT_SECONDS, what: str = "condition"
) -> T:
    """Poll ``check`` until it returns a truthy value (returned) or ``within`` seconds pass."""
    deadline = time.monotonic() + within
    last_error: BaseException | None = None
    while True:
        try:
            value = await check()
            if value:
                return value
        except (httpx.HTTPError, AssertionError) as exc:
            last_error = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {within:.0f}s (last error: {last_error!r})")
        await asyncio.sleep(POLL_SECONDS)


async def path_source(mediamtx: httpx.AsyncClient, name: str) -> str | None:
    """The source MediaMTX has configured for path ``name``, or None when the path does not exist."""
    response = await mediamtx.get(f"/v3/config/paths/get/{name}")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    source: str = response.json()["source"]
    return source


async def path_names(mediamtx: httpx.AsyncClient) -> set[str]:
    names: set[str] = set()
    page = 0
    while True:
        body = (
            await mediamtx.get("/v3/config/paths/list", params={"page": page, "itemsPerPage": 1000})
        ).json()
        names |= {item["name"] for item in body["items"]}
        page += 1
        if page >= body["pageCount"]:
            return names


async def run_cli(env: LocalEnvironment, service: str, *command: str) -> tuple[int, str, str]:
    """Run an installed console script with the service's runtime env (`make sense-orphan` does this)."""
    process = await asyncio.create_subprocess_exec(
        *env.exec_args(service, *command),
        env=env.script_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), FLOW_TIMEOUT_SECONDS * 2)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def venv_bin(name: str) -> str:
    return str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / name)


async def orphan_report(env: LocalEnvironment) -> dict[str, Any]:
    """`sense-orphan report`: a new scan of every registered server, as JSON."""
    code, out, err = await run_cli(env, "orphan-scanner", venv_bin("sense-orphan"), "report")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


async def orphan_apply(env: LocalEnvironment, scan: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """`sense-orphan apply` of the scan, confirmed by its token: the exit code and the JSON result."""
    code, out, _ = await run_cli(
        env,
        "orphan-scanner",
        venv_bin("sense-orphan"),
        "apply",
        "--scan-id",
        scan["scan_id"],
        "--actor",
        "e2e-operator",
        "--confirm",
        scan["confirm"],
    )
    document: dict[str, Any] = json.loads(out)
    return code, document


def device_body(tenant: str, site: str, path: str, source: str, state: str = "enabled") -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "site_id": site,
        "name": f"camera {path}",
        "path_name": path,
        "source_uri": source,
        "desired_state": state,
    }


CHUNK_BYTES = 1024 * 1024  # media-worker's smallest chunk (every chunk but the last)


SOURCE_VIDEO_SIZE = (1280, 720)


@pytest.fixture(scope="session")
def source_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 12 s 720p test video with sound (more than the 10 s clip), several chunks long. At 5 frames a
    second: each transcode encodes a fifth of the frames 25 would make (a fifth of the CPU)."""
    path = tmp_path_factory.mktemp("e2e-media") / "source.mp4"
    width, height = SOURCE_VIDEO_SIZE
    subprocess.run(
        [
            "ffmpeg", "-v", "error",
            "-f", "lavfi", "-i", f"testsrc2=duration=12:size={width}x{height}:rate=5",
            "-f", "lavfi", "-i", "sine=frequency=440:duration=12",
            "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M", "-c:a", "aac", "-shortest", str(path),
        ],
        check=True,
    )  # fmt: skip
    assert path.stat().st_size > 3 * CHUNK_BYTES
    return path


def camera_source(witness: Witness, host: str) -> str:
    """An RTSP URL with a fresh credential, remembered as a secret that must never leak."""
    password = f"pw-{uuid.uuid4().hex}"
    witness.secrets.add(password)
    return f"rtsp://viewer:{password}@{host}:554/stream"
