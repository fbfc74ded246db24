"""The `bell-relay` worker: the audit pusher on PostgreSQL with one Bell connection pool for its life."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.service_layer.audit_pusher import AuditPusher
from sense_reconciler.service_layer.metrics import AuditPushMetrics
from yovision_platform.db import Identifier

WORKER_NAME = "bell-relay"  # the name /readyz and the doctor report (dashboards rely on it)


def audit_push_worker(
    pool: asyncpg.Pool,
    schema: Identifier,
    config: AuditPushConfig,
    *,
    owner: str,
    metrics: AuditPushMetrics | None = None,
) -> Callable[[asyncio.Event], Coroutine[Any, Any, None]]:
    store = PostgresAuditPushStore(pool, schema, owner, lease_seconds=config.lease_seconds)

    async def run(stop: asyncio.Event) -> None:
        async with BellClient(config) as bell:
            await AuditPusher(store, bell, config, metrics=metrics).run(stop)

    return run
