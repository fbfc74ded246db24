"""The source-URI secret rows (the platform's `SecretRowStore` port of key rotation): pages in device id
order, legacy cleartext rows only when asked, a compare-and-swap write; and the platform's rotation over
them. PostgreSQL and the fake alike."""

from __future__ import annotations

import os
import uuid
from typing import Any, cast

import pytest

from sense_reconciler.adapters.source_uri_secrets import FIELD
from sense_reconciler.domain.records import DeviceUpdate
from sense_reconciler.service_layer.source_uris import SourceUris, source_uri_context
from tests.support.sense_backends import Backend, MemoryBackend, PostgresBackend, register
from yovision_platform.security import EncryptionKeyRing, SecretRow, rotate_keys


async def page(
    backend: Backend, *, after: object = None, limit: int = 10, legacy_only: bool = False
) -> list[SecretRow]:
    async with backend.connection() as conn:
        return list(
            await backend.source_uri_secrets(legacy_only=legacy_only).page(conn, after=after, limit=limit)
        )


class SourceUriSecretsContract:
    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError

    async def test_rows_come_in_device_id_order_after_a_cursor(self, backend: Backend) -> None:
        ids = sorted([await register(backend) for _ in range(3)])
        rows = await page(backend)
        assert [r.row_id for r in rows] == ids
        secret = rows[0].fields[FIELD]
        assert (secret.context, secret.stored, secret.plaintext) == (
            source_uri_context(ids[0]),
            b"sealed",
            None,
        )
        assert [r.row_id for r in await page(backend, after=ids[0], limit=1)] == ids[1:2]

    async def test_legacy_only_lists_the_cleartext_rows(self, backend: Backend) -> None:
        sealed, legacy = await register(backend), await register(backend)
        await backend.store_cleartext_source(legacy, "rtsp://u:pw@cam/1")
        rows = await page(backend, legacy_only=True)
        assert [r.row_id for r in rows] == [legacy]
        assert (rows[0].fields[FIELD].stored, rows[0].fields[FIELD].plaintext) == (None, b"rtsp://u:pw@cam/1")
        assert sorted(r.row_id for r in await page(backend)) == sorted([sealed, legacy])

    async def test_a_swap_writes_only_over_the_values_it_read(self, backend: Backend) -> None:
        device_id = await register(backend)
        await backend.store_cleartext_source(device_id, "rtsp://u:pw@cam/1")
        [row] = await page(backend)
        store = backend.source_uri_secrets()
        async with backend.units() as uow:
            await uow.devices.update(
                device_id, DeviceUpdate(name="cam", source_uri_ciphertext=b"changed", desired_state="enabled")
            )
        async with backend.connection() as conn:
            assert not await store.swap(conn, row, {FIELD: b"rotated"})
        [changed] = await page(backend)
        async with backend.connection() as conn:
            assert await store.swap(conn, changed, {FIELD: b"rotated"})
        async with backend.units() as uow:
            stored = await uow.devices.stored_source(device_id)
        assert (stored.ciphertext, stored.plaintext) == (b"rotated", None)

    async def test_a_swap_of_a_cleartext_row_clears_the_cleartext(self, backend: Backend) -> None:
        device_id = await register(backend)
        await backend.store_cleartext_source(device_id, "rtsp://u:pw@cam/1")
        [row] = await page(backend, legacy_only=True)
        async with backend.connection() as conn:
            assert await backend.source_uri_secrets(legacy_only=True).swap(conn, row, {FIELD: b"sealed-now"})
        assert await page(backend, legacy_only=True) == []
        async with backend.units() as uow:
            stored = await uow.devices.stored_source(device_id)
        assert (stored.ciphertext, stored.plaintext) == (b"sealed-now", None)

    async def test_rotation_encrypts_every_row_under_the_active_key(self, backend: Backend) -> None:
        k1, k2 = os.urandom(32), os.urandom(32)
        old, new = EncryptionKeyRing({"k1": k1}, "k1"), EncryptionKeyRing({"k1": k1, "k2": k2}, "k2")
        sealed, legacy = uuid.uuid4(), uuid.uuid4()
        await register(backend, device_id=sealed)
        await register(backend, device_id=legacy)
        async with backend.units() as uow:
            ciphertext = SourceUris(old).seal(sealed, "rtsp://u:pw@cam/sealed")
            await uow.devices.update(
                sealed, DeviceUpdate(name="cam", source_uri_ciphertext=ciphertext, desired_state="enabled")
            )
        await backend.store_cleartext_source(legacy, "rtsp://u:pw@cam/legacy")
        report = await rotate_keys(pool_of(backend), backend.source_uri_secrets(), new, batch_rows=1)
        assert (report.rotated, report.already_current, report.unreadable) == (2, 0, {})
        async with backend.units() as uow:
            stored = {d: await uow.devices.stored_source(d) for d in (sealed, legacy)}
        assert SourceUris(new).reveal(sealed, stored[sealed]) == "rtsp://u:pw@cam/sealed"
        assert SourceUris(new).reveal(legacy, stored[legacy]) == "rtsp://u:pw@cam/legacy"
        assert all(new.is_current(s.ciphertext or b"") and s.plaintext is None for s in stored.values())


class _ConnectionsOf:
    """What `rotate_keys` needs of a pool (`acquire()`), over a backend's connections."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def acquire(self) -> Any:
        return self._backend.connection()


def pool_of(backend: Backend) -> Any:
    if isinstance(backend, PostgresBackend):
        return backend.pool
    assert isinstance(backend, MemoryBackend)
    return cast(Any, _ConnectionsOf(backend))


class TestPostgresSourceUriSecrets(SourceUriSecretsContract):
    @pytest.fixture
    def backend(self, postgres_backend: Backend) -> Backend:
        return postgres_backend


class TestMemorySourceUriSecrets(SourceUriSecretsContract):
    @pytest.fixture
    def backend(self, memory_backend: Backend) -> Backend:
        return memory_backend
