from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import asyncpg

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.model import CompareMode
from signal_watcher.entrypoints.scheduler_worker import SCAN_BATCH_SIZE, SCAN_INTERVAL_SECONDS, Scheduler
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    checks_of,
    cipher_for,
    fake_resolver,
    make_due,
    make_spec,
    use_cases_on,
)
from tests.support.stack import MigratedSchema
from yovision_platform.messaging import AvroSerde

WATCHERS = 1000


def test_scan_limits_match_the_spec() -> None:
    assert SCAN_INTERVAL_SECONDS == 30.0 and SCAN_BATCH_SIZE == 50


async def test_two_schedulers_probe_each_due_watcher_exactly_once(
    fixture_server: FixtureServer, signal_db: MigratedSchema, units: PostgresUnitsOfWork, serde: AvroSerde
) -> None:
    pools = [await asyncpg.create_pool(signal_db.runtime_dsn, min_size=1, max_size=6) for _ in range(2)]
    probes = [
        ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=LOOPBACK_FOR_TESTS)
        for _ in range(2)
    ]
    try:
        async with units() as uow:
            for i in range(WATCHERS):
                spec = make_spec(
                    fixture_server.url(FIXTURE_HOST, f"/status/200?w={i}"),
                    compare_mode=CompareMode.STATUS_CODE,
                )
                await uow.watchers.insert(f"user-{i % 7}", spec)
        instances = [PostgresUnitsOfWork(pool, units.schema, units.cipher) for pool in pools]
        schedulers = [
            Scheduler(use_cases_on(own, probe).check_runner, f"instance-{n}", max_in_flight=100)
            for n, (own, probe) in enumerate(zip(instances, probes, strict=True))
        ]
        for _round in range(2):
            started = await asyncio.gather(*(s.scan() for s in schedulers))
            await asyncio.gather(*(s.drain(60) for s in schedulers))
            assert sum(started) == WATCHERS
            assert all(n > 0 for n in started), started  # both instances took part
            assert await asyncio.gather(*(s.scan() for s in schedulers)) == [0, 0]  # nothing due any more
            await make_due(pools[0], units.schema)
        assert len(fixture_server.requests) == WATCHERS
        assert set(fixture_server.requests.values()) == {2}
        per_watcher = await pools[0].fetch(
            f"SELECT count(*) AS n FROM {units.schema.quoted}.checks GROUP BY watcher_id"
        )
        assert len(per_watcher) == WATCHERS and {r["n"] for r in per_watcher} == {2}
    finally:
        for probe in probes:
            await probe.aclose()
        for pool in pools:
            await pool.close()


SCHEDULER_PROCESS = Path(__file__).with_name("scheduler_process.py")
REPO_ROOT = Path(__file__).resolve().parents[3]


async def test_two_scheduler_processes_probe_each_due_watcher_exactly_once(
    fixture_server: FixtureServer, signal_db: MigratedSchema, pool: asyncpg.Pool
) -> None:
    key = os.urandom(32)
    async with PostgresUnitsOfWork(pool, signal_db.name, cipher_for(key))() as uow:
        for i in range(WATCHERS):
            spec = make_spec(
                fixture_server.url(FIXTURE_HOST, f"/status/200?p={i}"), compare_mode=CompareMode.STATUS_CODE
            )
            await uow.watchers.insert(f"user-{i % 7}", spec)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCHEDULER_PROCESS),
            signal_db.runtime_dsn,
            str(signal_db.name),
            key.hex(),
            f"process-{n}",
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(2)
    ]
    for process in processes:
        assert process.stdout is not None
        assert (await asyncio.wait_for(process.stdout.readline(), 60)).strip() == b"ready"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        await process.stdin.drain()
    outputs = [await asyncio.wait_for(process.communicate(), 120) for process in processes]
    results = [json.loads(stdout.decode().strip().splitlines()[-1]) for stdout, _ in outputs]
    assert [p.returncode for p in processes] == [0, 0]
    assert sum(r["started"] for r in results) == WATCHERS and all(r["started"] > 0 for r in results), results
    assert sum(r["done"] for r in results) == WATCHERS
    assert len(fixture_server.requests) == WATCHERS and set(fixture_server.requests.values()) == {1}
    async with pool.acquire() as conn:
        assert await conn.fetchval(f"SELECT count(*) FROM {signal_db.name.quoted}.checks") == WATCHERS


async def _wait_for_checks(scheduler: Scheduler, count: int, limit_seconds: float) -> None:
    for _ in range(int(limit_seconds / 0.05)):
        if scheduler.checks_done >= count:
            return
        await asyncio.sleep(0.05)


async def test_misbehaving_targets_do_not_delay_other_watchers(
    fixture_server: FixtureServer, units: PostgresUnitsOfWork, serde: AvroSerde
) -> None:
    probe = ProbeClient(
        resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}),
        guard=LOOPBACK_FOR_TESTS,
        read_timeout_seconds=2.0,
    )
    paths = {"hang": "/hang", "endless": "/endless", "redirect": "/redirect", "ok": "/status/200"}
    ids = {}
    async with units() as uow:
        for name, path in paths.items():
            spec = make_spec(
                fixture_server.url(FIXTURE_HOST, path), name=name, compare_mode=CompareMode.STATUS_CODE
            )
            ids[name] = (await uow.watchers.insert("user-1", spec)).id
    scheduler = Scheduler(use_cases_on(units, probe).check_runner, "instance-a", scan_interval_seconds=0.1)
    stop = asyncio.Event()
    worker = asyncio.create_task(scheduler.run(stop))
    try:
        started = time.monotonic()
        await _wait_for_checks(scheduler, 3, 10)
        assert time.monotonic() - started < 1.5  # ok, endless and redirect finished while /hang still hangs
        ok = await checks_of(units, ids["ok"])
        assert len(ok) == 1 and ok[0].error_code is None and ok[0].http_status == 200
        await _wait_for_checks(scheduler, 4, 10)
    finally:
        stop.set()
        await worker
        await probe.aclose()
    codes = {}
    for name, watcher_id in ids.items():
        [check] = await checks_of(units, watcher_id)
        codes[name] = check.error_code
    assert codes == {"hang": "timeout", "endless": "too_large", "redirect": "redirect", "ok": None}
