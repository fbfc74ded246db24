"""Watcher secrets on real PostgreSQL: sent to the target and stored only encrypted, ciphertexts from before
the ring keep working and rotate, rotation while the API edits loses nothing. (Unreadable secrets as a
recorded failure: tests/unit/signal_watcher/test_check_runner.py, on the fake that
tests/ports/signal_watcher/test_watcher_secrets.py proves equal.)"""

from __future__ import annotations

import asyncio
import os
import uuid

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from signal_watcher.adapters.crypto import SecretCipher, body_context, headers_context
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.adapters.watcher_secrets import WatcherSecrets
from signal_watcher.domain.model import CompareMode, Header, Method
from signal_watcher.service_layer.checks import CheckRunner
from tests.support.fixture_server import FixtureServer
from tests.support.signal_watcher_fixtures import FIXTURE_HOST, check_now, insert, make_spec, stored
from yovision_platform.security import EncryptionKeyRing, rotate_keys

HEADER = Header("Authorization", "Bearer sec-" + "7" * 20)


def reading_with(units: PostgresUnitsOfWork, ring: EncryptionKeyRing) -> PostgresUnitsOfWork:
    return PostgresUnitsOfWork(units.pool, units.schema, SecretCipher(ring))


async def create(units: PostgresUnitsOfWork, url: str, body: str | None = None) -> uuid.UUID:
    spec = make_spec(url, headers=(HEADER,), method=Method.POST if body else Method.GET, body=body)
    return (await insert(units, "user-1", spec)).id


async def secrets_of(
    units: PostgresUnitsOfWork, watcher_id: uuid.UUID
) -> tuple[tuple[Header, ...], str | None]:
    record = await stored(units, "user-1", watcher_id)
    return record.spec.headers, record.spec.body


async def test_headers_and_body_are_sent_and_stored_encrypted(
    fixture_server: FixtureServer, units: PostgresUnitsOfWork, runner: CheckRunner
) -> None:
    spec = make_spec(
        fixture_server.url(FIXTURE_HOST, "/echo"),
        method=Method.POST,
        headers=(Header("Authorization", "Bearer sekret-token-123"),),
        body="body-sekret-456",
        compare_mode=CompareMode.STATUS_CODE,  # /echo reflects the secrets; keep them out of the excerpt
    )
    watcher = await insert(units, "user-1", spec)
    await check_now(units, runner, watcher.id)
    raw = await units.pool.fetchrow(f"SELECT * FROM {units.schema.quoted}.watchers")
    checks = await units.pool.fetch(f"SELECT * FROM {units.schema.quoted}.checks")
    assert raw is not None and len(checks) == 1 and checks[0]["http_status"] == 200
    dump = repr(dict(raw)) + repr([dict(c) for c in checks])
    for secret in ("sekret-token-123", "body-sekret-456", "Authorization"):
        assert secret not in dump
        assert secret.encode() not in raw["headers_ciphertext"] + raw["body_ciphertext"]
    assert raw["body_length"] == len("body-sekret-456")
    assert (await stored(units, "user-1", watcher.id)).spec.headers == (
        Header("Authorization", "Bearer sekret-token-123"),
    )


async def test_ciphertexts_from_before_the_ring_are_read_and_rotated(
    units: PostgresUnitsOfWork, fixture_server: FixtureServer
) -> None:
    legacy_key, new_key = os.urandom(32), os.urandom(32)
    watcher_id = await create(units, fixture_server.url(FIXTURE_HOST, "/text"), body="pw=1")
    # what signal-watcher wrote before the ring: nonce || ciphertext, no key id
    aead = AESGCM(legacy_key)
    n1, n2 = os.urandom(12), os.urandom(12)
    headers_plain = b'[["Authorization", "Bearer sec-77777777777777777777"]]'
    legacy_headers = n1 + aead.encrypt(n1, headers_plain, headers_context(str(watcher_id)).encode())
    legacy_body = n2 + aead.encrypt(n2, b"pw=1", body_context(str(watcher_id)).encode())
    await units.pool.execute(
        f"UPDATE {units.schema.quoted}.watchers SET headers_ciphertext = $2, body_ciphertext = $3 "
        "WHERE id = $1",
        watcher_id,
        legacy_headers,
        legacy_body,
    )
    ring = EncryptionKeyRing({"legacy": legacy_key, "k2": new_key}, "k2", accept_legacy=True)
    assert await secrets_of(reading_with(units, ring), watcher_id) == ((HEADER,), "pw=1")
    report = await rotate_keys(units.pool, WatcherSecrets(units.schema), ring, batch_rows=1)
    assert report.unreadable == {} and report.changed_meanwhile == 0 and report.rotated >= 1
    only_new = reading_with(units, EncryptionKeyRing({"k2": new_key}, "k2"))
    assert await secrets_of(only_new, watcher_id) == ((HEADER,), "pw=1")


async def test_rotation_while_the_api_edits_loses_no_edit_and_leaves_no_old_key(
    units: PostgresUnitsOfWork, fixture_server: FixtureServer
) -> None:
    old_key, new_key = os.urandom(32), os.urandom(32)
    before = reading_with(units, EncryptionKeyRing({"k1": old_key}, "k1"))
    ring = EncryptionKeyRing({"k1": old_key, "k2": new_key}, "k2")
    serving = reading_with(units, ring)
    url = fixture_server.url(FIXTURE_HOST, "/text")
    ids = [await create(before, url, body=f"body-{n}") for n in range(40)]
    edited: dict[uuid.UUID, Header] = {}

    async def edit_while_rotating() -> None:
        for round_ in range(3):
            for watcher_id in ids[round_::3]:
                header = Header("Authorization", f"Bearer edit-{round_}-{watcher_id.hex[:8]}")
                async with serving() as uow:
                    await uow.watchers.update_spec(
                        "user-1",
                        watcher_id,
                        make_spec(url, headers=(header,), method=Method.POST, body="edited"),
                        reset_baseline=True,
                    )
                edited[watcher_id] = header
                await asyncio.sleep(0)

    report, _ = await asyncio.gather(
        rotate_keys(units.pool, WatcherSecrets(units.schema), ring, batch_rows=7), edit_while_rotating()
    )
    assert report.unreadable == {} and report.changed_meanwhile == 0
    only_new = reading_with(units, EncryptionKeyRing({"k2": new_key}, "k2"))
    for n, watcher_id in enumerate(ids):
        headers, body = await secrets_of(only_new, watcher_id)
        if watcher_id in edited:
            assert (headers, body) == ((edited[watcher_id],), "edited")
        else:
            assert (headers, body) == ((HEADER,), f"body-{n}")
