"""The relay against the real Bell process: delivered exactly once, duplicates acknowledged, per-item
rejections dead-lettered, a wrong key retried as a whole, oldest facts first, no secret in any log line."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import ssl
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from sense_reconciler.bell_relay.client import BellClient
from sense_reconciler.bell_relay.outcome import BatchErrorCode, ItemResults, ItemStatus
from sense_reconciler.bell_relay.repository import OutboxRepository
from sense_reconciler.bell_relay.worker import BellRelayWorker
from tests.conftest import MigratedSchema, private_file
from tests.integration.bell_receiver.conftest import KEY_ID, Keys
from tests.integration.bell_receiver.relay_client import RelayClient, fact
from tests.integration.bell_receiver.test_bell_process import BellProcess, wait_healthy
from tests.integration.sense_bell_relay.conftest import Outbox, bell_event_counts, relay_config
from tests.tls import self_signed
from yovision_platform.db import Identifier
from yovision_platform.signing import KeyRing


async def test_facts_reach_bell_once_and_a_resend_is_acknowledged_as_duplicate(
    bell_url: str,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    admin_conn: asyncpg.Connection,
    schema_name: Identifier,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    event_ids = await outbox.add(3, version=1) + await outbox.add(2, version=2)
    config = relay_config(bell_url, keys)
    worker = BellRelayWorker(sense_pool, sense_schema.name, config, owner="relay-a")
    async with BellClient(config) as client:
        # A claim whose answer is never recorded (a crash before step 3): Bell stores and says accepted.
        async with sense_pool.acquire() as conn:
            claim = await OutboxRepository(sense_schema.name).claim(
                conn, "crashed", limit=100, lease_seconds=0.2
            )
        first = await client.send([c.fact for c in claim.facts])
        assert isinstance(first, ItemResults)
        assert [i.status for i in first.items] == [ItemStatus.ACCEPTED] * 5
        assert [i.event_id for i in first.items] == event_ids
        assert await outbox.undelivered() == 5

        await outbox.wait_leases_expired()
        round_ = await worker.run_once(client)
        assert (round_.claimed, round_.delivered, round_.dead_lettered, round_.failure) == (5, 5, 0, None)
        rows = await outbox.rows()
        assert all(r["delivered_at"] is not None and r["lease_owner"] is None for r in rows)
        delivered_at = [r["delivered_at"] for r in rows]

        resent = await client.send([c.fact for c in claim.facts])
        assert isinstance(resent, ItemResults)
        assert [i.status for i in resent.items] == [ItemStatus.DUPLICATE] * 5

        assert (await worker.run_once(client)).claimed == 0
    assert [r["delivered_at"] for r in await outbox.rows()] == delivered_at
    assert await bell_event_counts(admin_conn, schema_name) == dict.fromkeys(event_ids, 1)
    assert keys.relay_hex not in caplog.text and "rtsp://" not in caplog.text


async def test_rejected_items_are_dead_lettered_with_their_code_and_the_rest_delivered(
    bell_url: str,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    admin_conn: asyncpg.Connection,
    schema_name: Identifier,
) -> None:
    good = await outbox.add(2)
    invalid = await outbox.add(1, tenant_id="tenant with spaces")
    conflicting = await outbox.add(1, version=2)
    # Bell already holds another fact under the same event id: the outbox's fact is an id_conflict.
    async with httpx.AsyncClient(base_url=bell_url, timeout=5) as http:
        stored = await RelayClient(http, keys.signing_ring).post_items([fact(event_id=str(conflicting[0]))])
        assert stored.json()["results"][0]["status"] == "accepted"

    worker = BellRelayWorker(sense_pool, sense_schema.name, relay_config(bell_url, keys), owner="relay-a")
    async with BellClient(relay_config(bell_url, keys)) as client:
        round_ = await worker.run_once(client)
        assert (round_.delivered, round_.dead_lettered) == (2, 2)
        assert (await worker.run_once(client)).claimed == 0
    by_id = {r["event_id"]: r for r in await outbox.rows()}
    for event_id in good:
        assert by_id[event_id]["delivered_at"] is not None and by_id[event_id]["dead_lettered_at"] is None
    for event_id, code in ((invalid[0], "invalid_field"), (conflicting[0], "id_conflict")):
        row = by_id[event_id]
        assert row["delivered_at"] is None and row["dead_lettered_at"] is not None
        assert row["dead_letter_code"] == code and row["lease_token"] is None
    assert len(by_id) == 4  # facts are never deleted
    assert set(await bell_event_counts(admin_conn, schema_name)) == {*good, conflicting[0]}


async def test_a_key_bell_does_not_know_fails_the_whole_batch_as_unauthorized(
    bell_url: str,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    tmp_path: Path,
) -> None:
    await outbox.add(3)
    other_key = private_file(tmp_path / "other.key", secrets.token_hex(32))
    config = relay_config(bell_url, keys)
    wrong = dataclasses.replace(
        config, keyring=KeyRing.from_key_files({KEY_ID: other_key}, "test", active_key_id=KEY_ID)
    )
    worker = BellRelayWorker(sense_pool, sense_schema.name, wrong, owner="relay-a")
    async with BellClient(wrong) as client:
        round_ = await worker.run_once(client)
    assert round_.failure is BatchErrorCode.UNAUTHORIZED
    rows = await outbox.rows()
    assert {
        (r["attempts"], r["last_error_code"], r["delivered_at"], r["dead_lettered_at"]) for r in rows
    } == {(1, "unauthorized", None, None)}


async def test_a_backlog_goes_out_oldest_first_in_batches_of_100(
    bell_url: str,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    admin_conn: asyncpg.Connection,
    schema_name: Identifier,
) -> None:
    event_ids = await outbox.add(150)
    worker = BellRelayWorker(sense_pool, sense_schema.name, relay_config(bell_url, keys), owner="relay-a")
    async with BellClient(relay_config(bell_url, keys)) as client:
        assert (await worker.run_once(client)).delivered == 100
        delivered = {r["event_id"] for r in await outbox.rows() if r["delivered_at"] is not None}
        assert delivered == set(event_ids[:100])
        assert (await worker.run_once(client)).delivered == 50
    assert await bell_event_counts(admin_conn, schema_name) == dict.fromkeys(event_ids, 1)


async def test_facts_reach_a_bell_behind_tls_that_sense_trusts_through_ssl_cert_file(
    bell: BellProcess,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the Helm chart runs it across pods: Bell serves HTTPS (BELL_HTTP_TLS_*), Sense trusts its CA
    through SSL_CERT_FILE; without that CA the certificate is refused and nothing is delivered."""
    cert, key = self_signed(tmp_path, "bell")
    bell.env |= {"BELL_HTTP_TLS_CERT_FILE": str(cert), "BELL_HTTP_TLS_KEY_FILE": str(key)}
    assert bell.run("migrate").returncode == 0
    bell.start()
    url = f"https://127.0.0.1:{bell.port}"
    async with httpx.AsyncClient(base_url=url, verify=ssl.create_default_context(cafile=str(cert))) as http:
        await wait_healthy(http)
    event_ids = await outbox.add(2)
    config = relay_config(url, keys, backoff_base_seconds=0.05, backoff_cap_seconds=0.05)
    worker = BellRelayWorker(sense_pool, sense_schema.name, config, owner="relay-tls")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with BellClient(config) as untrusting:
        refused = await worker.run_once(untrusting)
    assert (refused.delivered, refused.failure) == (0, BatchErrorCode.NETWORK_ERROR)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    async with BellClient(config) as trusting:
        deadline = time.monotonic() + 10
        while (delivered := await worker.run_once(trusting)).claimed == 0:  # until the 50 ms backoff passed
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    assert (delivered.claimed, delivered.delivered, delivered.failure) == (2, 2, None)
    assert {r["event_id"] for r in await outbox.rows() if r["delivered_at"] is not None} == set(event_ids)
