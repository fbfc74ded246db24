"""Whole-batch failures back off 1 s, 2 s, 4 s, ... capped at 300 s by the DB clock; an expired lease
fences off the stale worker; two workers never have the same fact in flight at once."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import asyncpg
import pytest

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.domain.audit_push import BACKOFF_CAP_SECONDS
from sense_reconciler.domain.audit_push_outcome import PushFailureCode
from sense_reconciler.entrypoints.audit_push_worker import AuditPushWorker
from tests.integration.sense_audit_push.fake_bell import (
    FakeBell,
    Handler,
    forward,
    hang,
    missing_items,
    status_only,
)
from tests.support.bell_receiver_fixtures import Keys
from tests.support.kafka import wait_until
from tests.support.sense_audit_push_fixtures import (
    Outbox,
    bell_event_counts,
    claiming_round,
    push_config,
    pusher,
)
from tests.support.stack import MigratedSchema, free_port
from yovision_platform.messaging import CursorFenced
from yovision_platform.storage import Identifier


@asynccontextmanager
async def fake_bell(handler: Handler) -> AsyncIterator[FakeBell]:
    fake = FakeBell(handler)
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def db_now(pool: asyncpg.Pool) -> object:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT clock_timestamp()")


async def make_due(outbox: Outbox, attempts: int | None = None) -> None:
    async with outbox.pool.acquire() as conn:
        await conn.execute(
            f"""UPDATE {outbox.schema.quoted}.outbox_cursors
                   SET next_attempt_at = now() - interval '1 millisecond', attempts = coalesce($1, attempts)
                 WHERE outbox = 'device_operation_outbox'""",
            attempts,
        )


async def test_server_errors_back_off_exponentially_to_the_cap_and_deliver_nothing(
    keys: Keys, outbox: Outbox, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    await outbox.add(2)
    async with fake_bell(status_only(500)) as fake:
        config = push_config(fake.url, keys)
        async with BellClient(config) as client:
            worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
            # attempts before the round -> expected delay: 1, 2, 4 s, then the cap around 2**8 = 256 s.
            for attempts_before, delay in [
                (0, 1),
                (1, 2),
                (2, 4),
                (8, 256),
                (9, 300),
                (10, 300),
                (5000, 300),
            ]:
                await make_due(outbox, attempts_before)
                before = await db_now(sense_pool)
                round_ = await claiming_round(worker)
                after = await db_now(sense_pool)
                assert round_.failure is PushFailureCode.SERVER_ERROR and round_.claimed == 2
                row = await outbox.cursor()
                assert row["attempts"] == attempts_before + 1
                assert row["last_error_code"] == "server_error"
                assert await outbox.undelivered() == 2 and await outbox.dead_letters() == {}
                wait = timedelta(seconds=min(delay, BACKOFF_CAP_SECONDS))
                assert before + wait <= row["next_attempt_at"] <= after + wait  # type: ignore[operator]
                # Not due until the backoff has passed.
                assert (await worker.run_once()).claimed == 0
    assert fake.requests == 7


@pytest.mark.parametrize(
    ("handler", "code"),
    [
        (hang(5.0), PushFailureCode.TIMEOUT),
        (missing_items(), PushFailureCode.RESULT_COUNT_MISMATCH),
        (status_only(503), PushFailureCode.SERVER_ERROR),
        (status_only(401), PushFailureCode.UNAUTHORIZED),
    ],
)
async def test_a_whole_batch_failure_retries_every_fact_after_one_second(
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    handler: Handler,
    code: PushFailureCode,
) -> None:
    await outbox.add(3)
    async with fake_bell(handler) as fake:
        config = push_config(fake.url, keys, request_deadline_seconds=0.3)
        async with BellClient(config) as client:
            worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
            round_ = await claiming_round(worker)
    assert round_.failure is code
    row = await outbox.cursor()
    assert (row["attempts"], row["last_error_code"]) == (1, code.value)
    assert await outbox.undelivered() == 3
    assert timedelta(seconds=0.5) < row["next_attempt_at"] - row["db_now"] <= timedelta(seconds=1)


async def test_an_unreachable_bell_is_a_network_error(
    keys: Keys, outbox: Outbox, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    await outbox.add(1)
    config = push_config(f"http://127.0.0.1:{free_port()}", keys)
    async with BellClient(config) as client:
        worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
        assert (await claiming_round(worker)).failure is PushFailureCode.NETWORK_ERROR
    row = await outbox.cursor()
    assert (row["attempts"], row["last_error_code"]) == (1, "network_error")


async def test_an_expired_lease_passes_to_a_second_worker_and_the_stale_one_cannot_write(
    outbox: Outbox, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    await outbox.add(3)
    stale_repo = PostgresAuditPushStore(sense_pool, sense_schema.name, "pusher-a", lease_seconds=0.3)
    fresh_repo = PostgresAuditPushStore(sense_pool, sense_schema.name, "pusher-b", lease_seconds=30)
    stale = await stale_repo.acquire()
    assert stale is not None
    batch = await stale_repo.reader(stale, 100).next_batch()
    assert len(batch.facts) == 3
    assert await fresh_repo.acquire() is None, "held: the second worker waits"
    await outbox.wait_leases_expired()
    fresh = await fresh_repo.acquire()
    assert fresh is not None and fresh.epoch == stale.epoch + 1 and fresh.position == stale.position
    with pytest.raises(CursorFenced):
        await stale_repo.record_results(stale, batch.after, [(batch.facts[2].row_id, "id_conflict")])
    with pytest.raises(CursorFenced):
        await stale_repo.fail_batch(stale, "timeout", base_seconds=1, cap_seconds=300)
    row = await outbox.cursor()
    assert (row["owner"], row["attempts"], row["last_id"]) == ("pusher-b", 0, 0)
    assert await outbox.undelivered() == 3 and await outbox.dead_letters() == {}
    await fresh_repo.record_results(fresh, batch.after, [])
    assert await outbox.undelivered() == 0


async def test_a_worker_whose_lease_was_taken_during_the_request_records_nothing(
    keys: Keys, outbox: Outbox, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    await outbox.add(2)
    successor = PostgresAuditPushStore(sense_pool, sense_schema.name, "pusher-b", lease_seconds=30)
    taken_over: list[object] = []

    async def take_over_then_accept(number: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        async with sense_pool.acquire() as conn:
            await conn.execute(
                f"""UPDATE {outbox.schema.quoted}.outbox_cursors SET lease_expires_at = now()
                     WHERE outbox = 'device_operation_outbox'"""
            )
        taken_over.append(await successor.acquire())
        items = json.loads(body)["items"]
        results = [
            {"index": i, "status": "accepted", "event_id": item["event_id"], "code": None}
            for i, item in enumerate(items)
        ]
        return 200, json.dumps({"contract": "sense-audit-relay-v1", "results": results}).encode()

    async with fake_bell(take_over_then_accept) as fake:
        config = push_config(fake.url, keys)
        async with BellClient(config) as client:
            worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
            round_ = await claiming_round(worker)
    assert round_.lease_lost and round_.delivered == 0
    assert (await outbox.cursor())["owner"] == "pusher-b"
    assert await outbox.undelivered() == 2
    assert len(taken_over) == 1 and taken_over[0] is not None


async def test_two_workers_never_send_the_same_fact_at_the_same_time(
    bell_url: str,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    admin_conn: asyncpg.Connection,
    schema_name: Identifier,
) -> None:
    event_ids = await outbox.add(300)
    in_flight: set[str] = set()
    overlaps: list[str] = []
    sent: Counter[str] = Counter()

    async def watch(number: int, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        ids = {item["event_id"] for item in json.loads(body)["items"]}
        overlaps.extend(ids & in_flight)
        in_flight.update(ids)
        sent.update(ids)
        try:
            await asyncio.sleep(0.02)
            return await forward(bell_url, body, headers)
        finally:
            in_flight.difference_update(ids)

    async with fake_bell(watch) as fake:
        config = push_config(fake.url, keys, batch_size=20)
        stop = asyncio.Event()
        async with BellClient(config) as client_a, BellClient(config) as client_b:
            workers = [
                pusher(sense_pool, sense_schema.name, config, client, owner=owner)
                for owner, client in (("pusher-a", client_a), ("pusher-b", client_b))
            ]
            tasks = [asyncio.create_task(AuditPushWorker(w).run(stop)) for w in workers]
            try:
                await wait_until(lambda: _all_delivered(outbox), timeout_seconds=60, interval=0.1)
            finally:
                stop.set()
                await asyncio.gather(*tasks)
    assert overlaps == []
    assert sent == Counter({str(event_id): 1 for event_id in event_ids})
    # 300 facts in batches of at most 20. Two concurrent SKIP LOCKED claims may split the rows differently
    # (one claim skips rows the other is locking), so a batch can be short: never fewer than 15 requests.
    assert 15 <= fake.requests <= 30
    assert await bell_event_counts(admin_conn, schema_name) == dict.fromkeys(event_ids, 1)


async def _all_delivered(outbox: Outbox) -> bool:
    return await outbox.undelivered() == 0
