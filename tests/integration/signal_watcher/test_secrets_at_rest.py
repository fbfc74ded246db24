"""Watcher secrets under the platform key ring on real PostgreSQL: unreadable secrets are a recorded
failure with a stable code, ciphertexts from before the ring keep working, rotation while serving loses
nothing."""

from __future__ import annotations

import asyncio
import os
import uuid

import asyncpg
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from signal_watcher.adapters.crypto import SecretCipher, body_context, headers_context
from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.repository import WatcherRepository
from signal_watcher.adapters.watcher_secrets import WatcherSecrets
from signal_watcher.domain.model import AUTO_DISABLE_FAILURES, Header, Method, Status
from signal_watcher.service_layer.checks import CheckRunner
from tests.integration.signal_watcher.conftest import FIXTURE_HOST, check_now, cipher_for, make_spec
from tests.integration.signal_watcher.fixture_server import FixtureServer
from yovision_platform.avro import AvroSerde
from yovision_platform.encryption import EncryptionKeyRing
from yovision_platform.key_rotation import rotate_keys

HEADER = Header("Authorization", "Bearer sec-" + "7" * 20)


async def create(pool: asyncpg.Pool, repo: WatcherRepository, url: str, body: str | None = None) -> uuid.UUID:
    spec = make_spec(url, headers=(HEADER,), method=Method.POST if body else Method.GET, body=body)
    async with pool.acquire() as conn:
        return (await repo.insert(conn, "user-1", spec)).id


async def test_unreadable_secrets_are_a_recorded_failure_that_disables_the_watcher(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    local_probe: ProbeClient,
    serde: AvroSerde,
) -> None:
    fixture_server.state["text"] = "v1"
    watcher_id = await create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    # the key that wrote the secrets is no longer in the ring: no probe, a failure with a stable code
    other = WatcherRepository(repo.schema, cipher_for(os.urandom(32), key_id="k9"))
    runner = CheckRunner(pool, other, local_probe, serde)
    for _ in range(AUTO_DISABLE_FAILURES):
        decision = await check_now(pool, other, runner, watcher_id)
        assert decision is not None and decision.error_code == "secret_key_unknown"
    async with pool.acquire() as conn:
        checks = await other.list_checks(conn, watcher_id, limit=10, offset=0)
        row = await conn.fetchrow(
            f"SELECT status, consecutive_failures FROM {repo.schema.quoted}.watchers WHERE id = $1",
            watcher_id,
        )
    assert [c.error_code for c in checks] == ["secret_key_unknown"] * AUTO_DISABLE_FAILURES
    assert (row["status"], row["consecutive_failures"]) == (Status.DISABLED.value, AUTO_DISABLE_FAILURES)
    assert all(c.http_status is None and c.duration_ms is None for c in checks)  # nothing was probed


async def test_a_tampered_ciphertext_is_a_recorded_failure_too(
    fixture_server: FixtureServer, pool: asyncpg.Pool, repo: WatcherRepository, runner: CheckRunner
) -> None:
    watcher_id = await create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    async with pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {repo.schema.quoted}.watchers "
            "SET headers_ciphertext = overlay(headers_ciphertext placing '\\x00'::bytea from 30 for 1) "
            "WHERE id = $1",
            watcher_id,
        )
    decision = await check_now(pool, repo, runner, watcher_id)
    assert decision is not None and decision.error_code == "secret_unreadable"


async def test_ciphertexts_from_before_the_ring_are_read_and_rotated(
    pool: asyncpg.Pool, repo: WatcherRepository, fixture_server: FixtureServer
) -> None:
    legacy_key, new_key = os.urandom(32), os.urandom(32)
    watcher_id = await create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"), body="pw=1")
    # what signal-watcher wrote before the ring: nonce || ciphertext, no key id
    aead = AESGCM(legacy_key)
    n1, n2 = os.urandom(12), os.urandom(12)
    headers_plain = b'[["Authorization", "Bearer sec-77777777777777777777"]]'
    legacy_headers = n1 + aead.encrypt(n1, headers_plain, headers_context(str(watcher_id)).encode())
    legacy_body = n2 + aead.encrypt(n2, b"pw=1", body_context(str(watcher_id)).encode())
    async with pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {repo.schema.quoted}.watchers SET headers_ciphertext = $2, body_ciphertext = $3 "
            "WHERE id = $1",
            watcher_id,
            legacy_headers,
            legacy_body,
        )
    ring = EncryptionKeyRing({"legacy": legacy_key, "k2": new_key}, "k2", accept_legacy=True)
    upgraded = WatcherRepository(repo.schema, SecretCipher(ring))
    assert await secrets_of(pool, upgraded, watcher_id) == ((HEADER,), "pw=1")
    report = await rotate_keys(pool, WatcherSecrets(repo.schema), ring, batch_rows=1)
    assert report.unreadable == {} and report.changed_meanwhile == 0 and report.rotated >= 1
    only_new = WatcherRepository(repo.schema, SecretCipher(EncryptionKeyRing({"k2": new_key}, "k2")))
    assert await secrets_of(pool, only_new, watcher_id) == ((HEADER,), "pw=1")


async def secrets_of(
    pool: asyncpg.Pool, repo: WatcherRepository, watcher_id: uuid.UUID
) -> tuple[tuple[Header, ...], str | None]:
    async with pool.acquire() as conn:
        record = await repo.get(conn, "user-1", watcher_id)
    assert record is not None
    return record.spec.headers, record.spec.body


async def test_rotation_while_the_api_edits_loses_no_edit_and_leaves_no_old_key(
    pool: asyncpg.Pool, repo: WatcherRepository, fixture_server: FixtureServer
) -> None:
    old_key, new_key = os.urandom(32), os.urandom(32)
    before = WatcherRepository(repo.schema, SecretCipher(EncryptionKeyRing({"k1": old_key}, "k1")))
    ring = EncryptionKeyRing({"k1": old_key, "k2": new_key}, "k2")
    serving = WatcherRepository(repo.schema, SecretCipher(ring))
    url = fixture_server.url(FIXTURE_HOST, "/text")
    ids = [await create(pool, before, url, body=f"body-{n}") for n in range(40)]
    edited: dict[uuid.UUID, Header] = {}

    async def edit_while_rotating() -> None:
        for round_ in range(3):
            for watcher_id in ids[round_::3]:
                header = Header("Authorization", f"Bearer edit-{round_}-{watcher_id.hex[:8]}")
                async with pool.acquire() as conn:
                    await serving.update_spec(
                        conn,
                        "user-1",
                        watcher_id,
                        make_spec(url, headers=(header,), method=Method.POST, body="edited"),
                        reset_baseline=True,
                    )
                edited[watcher_id] = header
                await asyncio.sleep(0)

    report, _ = await asyncio.gather(
        rotate_keys(pool, WatcherSecrets(repo.schema), ring, batch_rows=7), edit_while_rotating()
    )
    assert report.unreadable == {} and report.changed_meanwhile == 0
    only_new = WatcherRepository(repo.schema, SecretCipher(EncryptionKeyRing({"k2": new_key}, "k2")))
    for n, watcher_id in enumerate(ids):
        headers, body = await secrets_of(pool, only_new, watcher_id)
        if watcher_id in edited:
            assert (headers, body) == ((edited[watcher_id],), "edited")
        else:
            assert (headers, body) == ((HEADER,), f"body-{n}")
