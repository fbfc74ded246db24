"""Sense migration 0005 carries device_operation_outbox over to the cursor: facts pending at the upgrade are
pushed after it, in id order; delivered facts are not pushed again; dead-lettered ones are copied to the
dead-letter table with their code."""

from __future__ import annotations

import dataclasses
import json
import secrets

import asyncpg

from sense_reconciler.adapters.bell_client import BellClient
from tests.conftest import Stack, runtime_dsn_for
from tests.integration.bell_receiver.conftest import Keys
from tests.integration.sense_audit_push.conftest import (
    SENSE_MIGRATIONS,
    Outbox,
    claiming_round,
    pusher,
    relay_config,
)
from tests.integration.sense_audit_push.fake_bell import FakeBell
from yovision_platform.db import Identifier
from yovision_platform.migrations import SchemaPlan, migrate

LEGACY_STATES = ("pending", "delivered", "dead_lettered")


async def accept_all(number: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    items = json.loads(body)["items"]
    results = [
        {"index": i, "status": "accepted", "event_id": item["event_id"], "code": None}
        for i, item in enumerate(items)
    ]
    return 200, json.dumps({"contract": "sense-audit-relay-v1", "results": results}).encode()


async def test_facts_pending_at_the_upgrade_are_pushed_after_it_and_no_delivered_fact_again(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier, keys: Keys
) -> None:
    full = SchemaPlan.for_service(schema_name, SENSE_MIGRATIONS)
    before = dataclasses.replace(
        full, migrations=tuple(m for m in full.migrations if not (m.track == "service" and m.version >= 5))
    )
    password = secrets.token_urlsafe(16)
    await migrate(admin_conn, before, runtime_password=password)
    pool = await asyncpg.create_pool(runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", password))
    assert pool is not None
    fake = FakeBell(accept_all)
    await fake.start()
    try:
        outbox = Outbox(pool, schema_name)
        event_ids = await outbox.add(9)
        state = dict(zip(event_ids, LEGACY_STATES * 3, strict=True))
        for event_id, fate in state.items():
            if fate != "pending":
                column = "delivered_at" if fate == "delivered" else "dead_lettered_at"
                code = "invalid_field" if fate == "dead_lettered" else None
                await admin_conn.execute(
                    f"UPDATE {outbox.table} SET {column} = now(), dead_letter_code = $2 WHERE event_id = $1",
                    event_id,
                    code,
                )
        assert [m.name for m in await migrate(admin_conn, full, runtime_password=password)] == [
            "bell_relay_cursor",
            "media_servers",
            "source_uri_encrypted",
            "reconcile_refusals",
            "reconcile_replace_due",
        ]
        assert await outbox.dead_letters() == {
            e: "invalid_field" for e, f in state.items() if f == "dead_lettered"
        }
        config = relay_config(fake.url, keys)
        async with BellClient(config) as client:
            worker = pusher(pool, schema_name, config, client, owner="relay-a")
            round_ = await claiming_round(worker)
            assert (await worker.run_once()).claimed == 0
    finally:
        await fake.stop()
        await pool.close()
    pending = [e for e, f in state.items() if f == "pending"]
    assert (round_.claimed, round_.delivered) == (len(pending), len(pending))
    assert [item["event_id"] for body in fake.bodies for item in json.loads(body)["items"]] == [
        str(e) for e in pending
    ]
