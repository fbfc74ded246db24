"""An API change and the reconciler's renewal of the same device, interleaved at the worst moment, both
finish: no deadlock (found by schemathesis as a 500 on `PUT /desired-state`).

The reconciler holds the device's due row (its lease renewal) and then inserts a placement, whose foreign
key check takes a key-share lock on the device. The API locks the device, then waits for the due row. With
`FOR UPDATE` on the device the two waited for each other; the API's `FOR NO KEY UPDATE` leaves the key
check free.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from sense_reconciler.adapters.device_repository import PostgresDeviceStore
from sense_reconciler.adapters.reconcile_store import PostgresReconcileStore
from tests.support.sense_backends import PostgresBackend, register
from tests.support.stack import MigratedSchema

WAIT_SECONDS = 10.0


async def waiting_on_a_lock(observer: asyncpg.Connection, pid: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while (
        await observer.fetchval("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid) != "Lock"
    ):
        assert time.monotonic() < deadline, "the API change never waited for the due row"
        await asyncio.sleep(0.02)


async def test_an_api_change_waiting_for_a_renewing_reconciler_does_not_deadlock_it(
    sense_pool: asyncpg.Pool, sense_schema: MigratedSchema, admin_conn: asyncpg.Connection
) -> None:
    backend = PostgresBackend(sense_pool, sense_schema.name)
    device_id = await register(backend)
    async with backend.units() as uow:
        [item] = await uow.reconcile.claim("inst-a", [0], media_server="default", lease_seconds=30, limit=1)
    schema = sense_schema.name
    async with sense_pool.acquire() as reconciler, sense_pool.acquire() as api:
        reconciler_tx, api_tx = reconciler.transaction(), api.transaction()
        await reconciler_tx.start()
        await reconciler.execute(  # the renewal's row lock on the due row, held by the open transaction
            f"UPDATE {schema.quoted}.reconcile_state SET lease_expires_at = lease_expires_at "
            "WHERE device_id = $1",
            device_id,
        )
        await api_tx.start()
        devices = PostgresDeviceStore(api, schema)
        device = await devices.get(device_id, for_update=True)
        assert device is not None
        change = asyncio.create_task(devices.mark_due(device_id, device.media_server_id))
        await waiting_on_a_lock(admin_conn, api.get_server_pid())
        work = await PostgresReconcileStore(reconciler, schema).renew_and_load(item, lease_seconds=30)
        assert work.placed_now, "the placement insert (a key check on the device) ran"
        await reconciler_tx.commit()
        await asyncio.wait_for(change, WAIT_SECONDS)
        await api_tx.commit()
    async with backend.units() as uow:
        state = await uow.devices.reconcile_state(device_id)
    assert state is not None and state.desired_generation == 2
