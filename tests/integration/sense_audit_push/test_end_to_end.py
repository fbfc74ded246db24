"""The audit push against the real Bell process: delivered exactly once, duplicates acknowledged, per-item
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

from sense_reconciler.adapters.audit_push_store import PostgresAuditPushStore
from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.domain.audit_push_outcome import ItemResults, ItemStatus, PushFailureCode
from tests.support.audit_push_client import RelayClient, fact
from tests.support.bell_process import BellProcess, wait_healthy
from tests.support.bell_receiver_fixtures import KEY_ID, Keys
from tests.support.sense_audit_push_fixtures import (
    CurrentBell,
    Outbox,
    bell_event_counts,
    claiming_round,
    push_config,
    pusher,
)
from tests.support.stack import MigratedSchema, private_file
from tests.support.tls import self_signed
from yovision_platform.security import KeyRing
from yovision_platform.storage import Identifier


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
    config = push_config(bell_url, keys)
    before = await outbox.rows()
    async with BellClient(config) as client:
        worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
        # A batch whose answer is never recorded (a crash before the cursor moves): Bell stores it.
        crashed = PostgresAuditPushStore(sense_pool, sense_schema.name, "crashed", lease_seconds=1.0)
        lease = await crashed.acquire()
        assert lease is not None
        facts = list((await crashed.reader(lease, 100).next_batch()).facts)
        first = await client.send(facts)
        assert isinstance(first, ItemResults)
        assert [i.status for i in first.items] == [ItemStatus.ACCEPTED] * 5
        assert [i.event_id for i in first.items] == event_ids
        assert await outbox.undelivered() == 5

        await outbox.wait_leases_expired()
        round_ = await claiming_round(worker)
        assert (round_.claimed, round_.delivered, round_.dead_lettered, round_.failure) == (5, 5, 0, None)
        assert await outbox.undelivered() == 0

        resent = await client.send(facts)
        assert isinstance(resent, ItemResults)
        assert [i.status for i in resent.items] == [ItemStatus.DUPLICATE] * 5

        assert (await worker.run_once()).claimed == 0
    assert [dict(r) | {"db_now": None} for r in await outbox.rows()] == [
        dict(r) | {"db_now": None} for r in before
    ], "facts are never changed"
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

    config = push_config(bell_url, keys)
    async with BellClient(config) as client:
        worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
        round_ = await claiming_round(worker)
        assert (round_.delivered, round_.dead_lettered) == (2, 2)
        assert (await worker.run_once()).claimed == 0
    assert await outbox.dead_letters() == {invalid[0]: "invalid_field", conflicting[0]: "id_conflict"}
    assert await outbox.undelivered() == 0, "the cursor moves past rejected facts too"
    assert len(await outbox.rows()) == 4  # facts are never deleted
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
    config = push_config(bell_url, keys)
    wrong = dataclasses.replace(
        config, keyring=KeyRing.from_key_files({KEY_ID: other_key}, "test", active_key_id=KEY_ID)
    )
    async with BellClient(wrong) as client:
        round_ = await claiming_round(pusher(sense_pool, sense_schema.name, wrong, client, owner="pusher-a"))
    assert round_.failure is PushFailureCode.UNAUTHORIZED
    cursor = await outbox.cursor()
    assert (cursor["attempts"], cursor["last_error_code"]) == (1, "unauthorized")
    assert await outbox.undelivered() == 3 and await outbox.dead_letters() == {}


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
    config = push_config(bell_url, keys)
    async with BellClient(config) as client:
        worker = pusher(sense_pool, sense_schema.name, config, client, owner="pusher-a")
        assert (await claiming_round(worker)).delivered == 100
        assert set(await bell_event_counts(admin_conn, schema_name)) == set(event_ids[:100])
        assert await outbox.undelivered() == 50
        assert (await claiming_round(worker)).delivered == 50
    assert await bell_event_counts(admin_conn, schema_name) == dict.fromkeys(event_ids, 1)


async def test_facts_reach_a_bell_behind_tls_that_sense_trusts_through_ssl_cert_file(
    bell: BellProcess,
    keys: Keys,
    outbox: Outbox,
    sense_pool: asyncpg.Pool,
    sense_schema: MigratedSchema,
    admin_conn: asyncpg.Connection,
    schema_name: Identifier,
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
        await wait_healthy(http, bell)
    event_ids = await outbox.add(2)
    config = push_config(url, keys, backoff_base_seconds=0.05, backoff_cap_seconds=0.05)
    bell_now = CurrentBell()
    worker = pusher(sense_pool, sense_schema.name, config, bell_now, owner="pusher-tls")
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with BellClient(config) as untrusting:
        bell_now.client = untrusting
        refused = await claiming_round(worker)
    assert (refused.delivered, refused.failure) == (0, PushFailureCode.NETWORK_ERROR)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    async with BellClient(config) as trusting:
        bell_now.client = trusting
        deadline = time.monotonic() + 10
        while (delivered := await worker.run_once()).claimed == 0:  # until the 50 ms backoff passed
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    assert (delivered.claimed, delivered.delivered, delivered.failure) == (2, 2, None)
    assert await outbox.undelivered() == 0
    assert await bell_event_counts(admin_conn, schema_name) == dict.fromkeys(event_ids, 1)
