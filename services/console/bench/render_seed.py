"""Seeding of the console render benchmark (render_bench.py): the data each page lists, written through the
owning service's public API where that is its real path (devices, desired states, the orphan report) and
through its repository where a volume would take hours by API (audit rows, watchers, materials).

Everything goes into the benchmark environment's own schemas (`local_environment`): never the local
stack's. Nothing here is a service: it imports the services' repositories as their benchmarks do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bell_receiver.adapters.audit_trail import PostgresAuditTrail
from bell_receiver.domain.audit import AuditRow, Channel
from media_worker.adapters.repository import MediaTables, PostgresJobs, PostgresMaterials
from media_worker.domain.material import NewMaterial, UploadMode
from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.repository import PostgresCheckStore, PostgresWatcherStore
from signal_watcher.domain.model import CompareMode, Method, Status, WatcherSpec
from signal_watcher.domain.records import CheckRow
from signal_watcher.settings import LEGACY_KEY_ID
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.storage import Identifier
from yovision_platform.tools.environment import LocalEnvironment

REPO_ROOT = Path(__file__).resolve().parents[3]
TENANT = "bench"
SITES = 100
ENABLED_DEVICES = 40  # live MediaMTX paths the orphan report classifies (<= 16 per site: Sense's default)
ENABLED_PER_SITE = 16
STALE_CANDIDATES = 4  # enabled, then disabled, then re-added by hand: owned_stale
MANUAL_PATHS = 6  # added by hand, never Sense's: unowned
WATCHER_USERS = 100
CHECKS_OF_ONE_WATCHER = 500
AUDIT_BATCH = 1000
API_CONCURRENCY = 8
CONVERGE_SECONDS = 600.0
POLL_SECONDS = 0.5


@dataclass
class Seeded:
    """What the pages will list, and the handles the benchmark needs to address them."""

    device_ids: list[str] = field(default_factory=list)
    stale_paths: list[str] = field(default_factory=list)
    watcher_of_checks: str = ""
    audit_rows: int = 0
    materials: int = 0
    counts: dict[str, int] = field(default_factory=dict)


def bench_user(n: int) -> str:
    return f"bench-user-{n:03d}"


async def eventually(check: Callable[[], Awaitable[bool]], what: str, within: float) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{what}: not reached within {within:.0f} s")
        await asyncio.sleep(POLL_SECONDS)


async def _in_parallel(items: Iterable[Any], work: Callable[[Any], Awaitable[None]], workers: int) -> None:
    queue = iter(items)

    async def worker() -> None:
        for item in queue:
            await work(item)

    await asyncio.gather(*(worker() for _ in range(workers)))


# --- Sense: devices through the Control API ------------------------------------------------------------


def _site_of(n: int) -> str:
    if n < ENABLED_DEVICES:
        return f"site-{n // ENABLED_PER_SITE:03d}"
    return f"site-{n % SITES:03d}"


async def seed_devices(env: LocalEnvironment, sense: httpx.AsyncClient, count: int, seeded: Seeded) -> None:
    """`count` devices of one tenant over 100 sites; the first ENABLED_DEVICES enabled (live paths)."""
    ids: dict[int, str] = {}

    async def create(n: int) -> None:
        body = {
            "tenant_id": TENANT,
            "site_id": _site_of(n),
            "name": f"camera {n:05d}",
            "path_name": f"bench-dev-{n:05d}",
            "source_uri": f"rtsp://viewer:{secrets.token_hex(8)}@10.0.{n // 256 % 256}.{n % 256}:554/s",
            "desired_state": "enabled" if n < ENABLED_DEVICES else "disabled",
        }
        response = await sense.post("/v1/devices", json=body)
        response.raise_for_status()
        ids[n] = response.json()["id"]

    await _in_parallel(range(count), create, API_CONCURRENCY)
    seeded.device_ids = [ids[n] for n in range(count)]


async def wait_converged(sense: httpx.AsyncClient) -> None:
    async def converged() -> bool:
        metrics = (await sense.get("/metrics")).text
        lines = [line for line in metrics.splitlines() if line.startswith("sense_reconcile_unconverged")]
        return bool(lines) and all(float(line.rsplit(" ", 1)[1]) == 0 for line in lines)

    await eventually(converged, "every device converged", CONVERGE_SECONDS)


# --- orphans: stale and hand-made paths, then a report through the CLI ---------------------------------


async def stage_orphans(
    env: LocalEnvironment, sense: httpx.AsyncClient, mediamtx: httpx.AsyncClient, seeded: Seeded
) -> None:
    """As tests/e2e/test_orphans.py does: disable devices, wait for Sense to remove their paths, re-add
    them by hand (owned_stale candidates), add never-owned paths (unowned); then `sense-orphan report`."""
    stale = seeded.device_ids[:STALE_CANDIDATES]
    for device_id in stale:
        answer = await sense.put(f"/v1/devices/{device_id}/desired-state", json={"desired_state": "disabled"})
        answer.raise_for_status()
    names = [f"bench-dev-{n:05d}" for n in range(STALE_CANDIDATES)]

    async def removed() -> bool:
        found = [await mediamtx.get(f"/v3/config/paths/get/{name}") for name in names]
        return all(r.status_code == 404 for r in found)

    await eventually(removed, "Sense removed the disabled devices' paths", CONVERGE_SECONDS)
    for name in [*names, *(f"bench-manual-{n}" for n in range(MANUAL_PATHS))]:
        added = await mediamtx.post(
            f"/v3/config/paths/add/{name}", json={"source": "rtsp://10.255.0.1:554/s"}
        )
        added.raise_for_status()
    seeded.stale_paths = names
    await run_orphan_report(env)


async def run_orphan_report(env: LocalEnvironment) -> None:
    process = await asyncio.create_subprocess_exec(
        *env.exec_args("orphan-scanner", str(Path(sys.executable).parent / "sense-orphan"), "report"),
        env=env.script_env(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 120)
    if process.returncode != 0:
        raise RuntimeError(f"sense-orphan report exited {process.returncode}: {err.decode()[-500:]}")


# --- Bell: audit rows through its repository -----------------------------------------------------------


def _audit_row(n: int, device_ids: list[str], now: datetime) -> AuditRow:
    device = device_ids[n % len(device_ids)]
    event_type = ("device.config_changed", "device.desired_state_changed", "device.created")[n % 3]
    payload = {"fact_version": 2, "device_id": device, "changed_fields": ["name"], "seq": n}
    text = json.dumps(payload, sort_keys=True).encode()
    return AuditRow(
        source_system="sense",
        event_id=uuid.uuid4(),
        event_type=event_type,
        action=event_type,
        actor=f"console:{bench_user(n % WATCHER_USERS)}",
        tenant_id=TENANT,
        site_id=_site_of(n % len(device_ids)),
        device_id=device,
        occurred_at=now - timedelta(seconds=n * 26),  # 100,000 rows over about 30 days
        payload=payload,
        digest=hashlib.sha256(text).digest(),
    )


async def seed_audit(env: LocalEnvironment, total: int, seeded: Seeded) -> None:
    """Top Bell's trail up to `total` rows (the device creations already put theirs there)."""
    conn = await asyncpg.connect(dsn_of(env, "bell-receiver"))
    try:
        trail = PostgresAuditTrail(conn, Identifier(schema_of(env, "bell-receiver")))
        existing = await conn.fetchval(
            f'SELECT count(*) FROM "{schema_of(env, "bell-receiver")}".audit_events'
        )
        now = datetime.now(UTC)
        missing = max(0, total - existing)
        for start in range(0, missing, AUDIT_BATCH):
            rows = [
                _audit_row(n, seeded.device_ids, now) for n in range(start, min(missing, start + AUDIT_BATCH))
            ]
            async with conn.transaction():
                await trail.append(rows, Channel.KAFKA)
        seeded.audit_rows = existing + missing
    finally:
        await conn.close()


# --- Signal: watchers and one watcher's check log through its repository -------------------------------


async def seed_watchers(env: LocalEnvironment, total: int, seeded: Seeded) -> None:
    """`total` PAUSED watchers over WATCHER_USERS users (<= the per-user cap of 100): paused, so the
    environment's scheduler probes none of them while pages are measured."""
    setting = "SIGNAL_SECRETS_AES_KEY_FILE"
    ring = EncryptionKeyRing.from_key_files(
        {LEGACY_KEY_ID: (env.secret_file("signal-watcher", "SECRETS_AES_KEY_FILE"), setting)},
        None,
        active_setting=setting,
        accept_legacy=True,
    )
    schema = Identifier(schema_of(env, "signal-watcher"))
    spec = WatcherSpec(
        "price watch", "agent-1", "https://shop.example.com/item", Method.GET,
        (), None, 60, CompareMode.HASH, None, "Price changed: {diff}",
    )  # fmt: skip
    conn = await asyncpg.connect(dsn_of(env, "signal-watcher"))
    watchers, checks = (
        PostgresWatcherStore(conn, schema, SecretCipher(ring)),
        PostgresCheckStore(conn, schema),
    )
    try:
        per_user = total // WATCHER_USERS
        for user in range(WATCHER_USERS):
            async with conn.transaction():
                for _ in range(per_user):
                    record = await watchers.insert(bench_user(user), spec)
                    await watchers.set_status(bench_user(user), record.id, Status.PAUSED)
                    if not seeded.watcher_of_checks:
                        seeded.watcher_of_checks = str(record.id)
        watcher = uuid.UUID(seeded.watcher_of_checks)
        start = datetime.now(UTC) - timedelta(hours=CHECKS_OF_ONE_WATCHER)
        async with conn.transaction():
            for n in range(CHECKS_OF_ONE_WATCHER):
                failed = n % 17 == 0
                await checks.insert(
                    CheckRow(
                        uuid.uuid4(), watcher, start + timedelta(hours=n), None if failed else 200,
                        None if failed else f"{n // 10:064x}", n % 10 == 0 and not failed, None,
                        "timeout" if failed else None, 40 + n % 300, None,
                    ),
                )  # fmt: skip
    finally:
        await conn.close()


# --- media: done materials through the repository's job lifecycle --------------------------------------


async def seed_materials(env: LocalEnvironment, total: int, seeded: Seeded) -> None:
    """`total` done materials of bench-user-000, each through create -> claim -> start -> complete ->
    finish, as the worker would; media-worker is stopped meanwhile so it transcodes none of them."""
    await env.stop("media-worker")
    tables = MediaTables(Identifier(schema_of(env, "media-worker")))
    conn = await asyncpg.connect(dsn_of(env, "media-worker"))
    materials, jobs = PostgresMaterials(conn, tables), PostgresJobs(conn, tables)
    try:
        for n in range(total):
            material_id = uuid.uuid4()
            async with conn.transaction():
                await materials.add(
                    NewMaterial(
                        material_id, bench_user(0), f"clip {n:04d}", UploadMode.CHUNKED,
                        f"sources/bench/{material_id}", 10_000_000 + n, f"{n:064x}", "video/mp4",
                    )
                )  # fmt: skip
                await jobs.add(material_id)
                claimed = await jobs.claim("bench-seed", lease_seconds=60)
                assert claimed is not None
                await jobs.start(claimed.job_id, claimed.lease)
                await materials.set_processing(material_id)
                refs = {k: f"outputs/{material_id}/{k}" for k in ("cover", "preview_720p", "clip_10s")}
                await materials.complete(material_id, refs)
                await jobs.finish(claimed.job_id, claimed.lease, state="done")
        seeded.materials = total
    finally:
        await conn.close()
        await env.start("media-worker")


# --- helpers -------------------------------------------------------------------------------------------


def schema_of(env: LocalEnvironment, service: str) -> str:
    schema = env.service(service).schema
    assert schema is not None
    return schema


def dsn_of(env: LocalEnvironment, service: str) -> str:
    """The service's own runtime DSN (its role, its grants): the bench writes as the service would."""
    return env.secret_file(service, "DATABASE_DSN_FILE").read_text().strip()


async def count_rows(env: LocalEnvironment) -> dict[str, int]:
    """What the pages list, counted read-only with the stack's admin DSN."""
    queries = {
        "devices": ("sense-reconciler", "devices"),
        "watchers": ("signal-watcher", "watchers"),
        "audit rows": ("bell-receiver", "audit_events"),
        "materials": ("media-worker", "materials"),
    }
    conn = await asyncpg.connect(env.stack.admin_dsn)
    try:
        return {
            label: int(await conn.fetchval(f'SELECT count(*) FROM "{schema_of(env, service)}".{table}'))
            for label, (service, table) in queries.items()
        }
    finally:
        await conn.close()
