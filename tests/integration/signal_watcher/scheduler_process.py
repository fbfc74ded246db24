"""One scheduler instance as its own process, for the two-process test: claims and checks every due watcher
of the schema once (scan + drain), then prints how many checks it started. Test-only wiring: the probe
client maps FIXTURE_HOST to 127.0.0.1 and admits loopback, as the in-process tests do.

    python scheduler_process.py <runtime dsn> <schema> <aes key hex> <owner>
"""

from __future__ import annotations

import asyncio
import json
import sys

import asyncpg

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.entrypoints.scheduler_worker import Scheduler
from tests.support.signal_watcher_fixtures import (
    FIXTURE_HOST,
    LOOPBACK_FOR_TESTS,
    cipher_for,
    fake_resolver,
    use_cases_on,
)
from yovision_platform.storage import Identifier


async def main(dsn: str, schema: str, key_hex: str, owner: str) -> None:
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=6)
    probe = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=LOOPBACK_FOR_TESTS)
    try:
        units = PostgresUnitsOfWork(pool, Identifier(schema), cipher_for(bytes.fromhex(key_hex)))
        runner = use_cases_on(units, probe).check_runner
        scheduler = Scheduler(runner, owner, max_in_flight=100)
        print("ready", flush=True)
        sys.stdin.readline()  # both processes start scanning at the same moment
        started = await scheduler.scan()
        await scheduler.drain(120)
        print(json.dumps({"started": started, "done": scheduler.checks_done}), flush=True)
    finally:
        await probe.aclose()
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
