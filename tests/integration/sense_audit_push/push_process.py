"""The Sense → Bell audit pusher alone, as its own process, until SIGTERM (SIGKILL tests).

Env: the real settings ``SENSE_AUDIT_PUSH_ENABLED``, ``SENSE_BELL_URL``, ``SENSE_BELL_KEY_FILE``,
``SENSE_BELL_KEY_ID``, plus ``YOVISION_TEST_SENSE_SCHEMA``, ``YOVISION_TEST_SENSE_DSN_FILE`` (runtime DSN),
``YOVISION_TEST_LEASE_SECONDS``, ``YOVISION_TEST_DEADLINE_SECONDS`` and optionally
``YOVISION_TEST_PIPELINE_DEPTH``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal

import asyncpg

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.entrypoints.audit_push_worker import PIPELINE_DEPTH, AuditPushWorker
from sense_reconciler.service_layer.audit_pusher import AuditPusher
from sense_reconciler.settings import load_audit_push_config
from yovision_platform.observability import configure_logging
from yovision_platform.settings import read_dsn_file
from yovision_platform.storage import Identifier


async def push() -> None:
    config = load_audit_push_config(
        enabled=os.environ["SENSE_AUDIT_PUSH_ENABLED"] == "true",
        bell_url=os.environ["SENSE_BELL_URL"],
        key_file=os.environ["SENSE_BELL_KEY_FILE"],
        key_id=os.environ["SENSE_BELL_KEY_ID"],
    )
    assert config is not None
    config = dataclasses.replace(
        config,
        lease_seconds=float(os.environ["YOVISION_TEST_LEASE_SECONDS"]),
        request_deadline_seconds=float(os.environ["YOVISION_TEST_DEADLINE_SECONDS"]),
        poll_interval_seconds=0.05,
    )
    dsn = read_dsn_file(os.environ["YOVISION_TEST_SENSE_DSN_FILE"], "YOVISION_TEST_SENSE_DSN_FILE")
    pool = await asyncpg.create_pool(dsn.get_secret_value(), min_size=1, max_size=2)
    assert pool is not None
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    store = PostgresAuditPushStore(
        pool,
        Identifier(os.environ["YOVISION_TEST_SENSE_SCHEMA"]),
        f"pusher-{os.getpid()}",
        lease_seconds=config.lease_seconds,
    )
    try:
        async with BellClient(config) as bell:
            worker = AuditPushWorker(
                AuditPusher(store, bell, config),
                pipeline_depth=int(os.environ.get("YOVISION_TEST_PIPELINE_DEPTH", PIPELINE_DEPTH)),
            )
            await worker.run(stop)
    finally:
        await pool.close()


if __name__ == "__main__":
    configure_logging("sense-audit-push-test", "relay-test", "INFO")
    asyncio.run(push())
