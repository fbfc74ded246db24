"""Sense migration 0005 carries device_operation_outbox over to the cursor: facts pending at the upgrade are
pushed after it, in id order; delivered facts are not pushed again; dead-lettered ones are copied to the
dead-letter table with their code. The cursor starts at one snapshot (0010) even when a transaction of the
shared database ends while 0005 takes it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets

import asyncpg

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from tests.integration.sense_audit_push.fake_bell import FakeBell
from tests.support.bell_receiver_fixtures import Keys
from tests.support.kafka import wait_until
from tests.support.sense_audit_push_fixtures import (
    SENSE_MIGRATIONS,
    Outbox,
    claiming_round,
    push_config,
    pusher,
)
from tests.support.stack import Stack, runtime_dsn_for
from yovision_platform.storage import Identifier, SchemaPlan, migrate

LEGACY_STATES = ("pending", "delivered", "dead_lettered")


def before_0005(full: SchemaPlan) -> SchemaPlan:
    return dataclasses.replace(
        full, migrations=tuple(m for m in full.migrations if not (m.track == "service" and m.version >= 5))
    )


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
    password = secrets.token_urlsafe(16)
    await migrate(admin_conn, before_0005(full), runtime_password=password)
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
            "audit_push_cursor_one_snapshot",
            "trace_parent",
        ]
        assert await outbox.dead_letters() == {
            e: "invalid_field" for e, f in state.items() if f == "dead_lettered"
        }
        config = push_config(fake.url, keys)
        async with BellClient(config) as client:
            worker = pusher(pool, schema_name, config, client, owner="pusher-a")
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


async def test_the_first_read_finds_the_facts_when_a_transaction_ends_while_0005_takes_the_cursor(
    stack: Stack, admin_conn: asyncpg.Connection, schema_name: Identifier
) -> None:
    """0005 writes the cursor's first position with two calls of outbox_snapshot_before_self(), a VOLATILE
    function: each call takes a snapshot of its own. Here another transaction of the database ends between
    the two calls, as one of any other writer may (`make test`'s other worker): before 0010 the cursor
    started inside the window between those snapshots and its first read came back empty, the facts one
    read later (the store's contract test saw an empty first batch)."""
    full = SchemaPlan.for_service(schema_name, SENSE_MIGRATIONS)
    password = secrets.token_urlsafe(16)
    await migrate(admin_conn, before_0005(full), runtime_password=password)
    s = schema_name.quoted
    lock_key = secrets.randbits(31)
    # Every call after the first waits for the other transaction to end: it ends between 0005's two calls.
    await admin_conn.execute(
        f"ALTER FUNCTION {s}.outbox_snapshot_before_self() RENAME TO outbox_snapshot_before_self_raced"
    )
    await admin_conn.execute(f"""
        CREATE FUNCTION {s}.outbox_snapshot_before_self() RETURNS pg_snapshot
            LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog AS $$
        DECLARE
            snap pg_snapshot;
        BEGIN
            IF current_setting('yovision_test.snapshot_taken', true) = 'yes' THEN
                PERFORM pg_advisory_xact_lock_shared({lock_key});
            END IF;
            snap := {s}.outbox_snapshot_before_self_raced();
            PERFORM set_config('yovision_test.snapshot_taken', 'yes', true);
            RAISE NOTICE 'snapshot %', snap;
            RETURN snap;
        END
        $$
    """)
    snapshots: list[str] = []

    def taken(_conn: object, message: asyncpg.PostgresLogMessage) -> None:
        if message.message.startswith("snapshot "):
            snapshots.append(message.message.removeprefix("snapshot "))

    admin_conn.add_log_listener(taken)
    other = await asyncpg.connect(stack.admin_dsn)
    ending = other.transaction()
    await ending.start()
    other_xid = await other.fetchval("SELECT pg_current_xact_id()::text")
    await other.execute("SELECT pg_advisory_xact_lock($1)", lock_key)
    # A later transaction ends first: the other one is below each snapshot's xmax, in its running list.
    await admin_conn.fetchval("SELECT pg_current_xact_id()")
    upgrade = asyncio.create_task(migrate(admin_conn, full, runtime_password=password))
    migrating_pid = admin_conn.get_server_pid()

    async def between_the_two_calls() -> bool:
        blocked: bool = await other.fetchval(
            "SELECT $1::int = ANY(pg_blocking_pids($2::int))", other.get_server_pid(), migrating_pid
        )
        return blocked

    try:
        await wait_until(between_the_two_calls, timeout_seconds=30, interval=0.02)
        await ending.commit()
    finally:
        await other.close()  # ends the other transaction whatever happened: the upgrade goes on
        await upgrade
        admin_conn.remove_log_listener(taken)
    await admin_conn.execute(f"DROP FUNCTION {s}.outbox_snapshot_before_self()")
    await admin_conn.execute(
        f"ALTER FUNCTION {s}.outbox_snapshot_before_self_raced() RENAME TO outbox_snapshot_before_self"
    )
    assert len(snapshots) == 2
    running = [
        await admin_conn.fetchval(
            "SELECT $1::text::xid8 = ANY(ARRAY(SELECT pg_snapshot_xip($2::text::pg_snapshot)))",
            other_xid,
            snapshot,
        )
        for snapshot in snapshots
    ]
    assert running == [True, False], (other_xid, snapshots)

    pool = await asyncpg.create_pool(runtime_dsn_for(stack.admin_dsn, f"{schema_name}_app", password))
    assert pool is not None
    try:
        event_ids = await Outbox(pool, schema_name).add(3)
        store = PostgresAuditPushStore(pool, schema_name, "pusher-a", lease_seconds=30)
        lease = await store.acquire()
        assert lease is not None
        first = await store.reader(lease, 100).next_batch()
        assert [f.event_id for f in first.facts] == event_ids, (snapshots, lease.position, first)
        assert lease.position.prev == lease.position.cur and lease.position.prev in snapshots
    finally:
        await pool.close()
