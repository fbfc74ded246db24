"""Watcher secrets at rest: both adapters keep headers and body only sealed by the key ring, bound to their
watcher, and refuse alike what the ring cannot open (`SecretsUnreadable` for a read, `secrets_error` for
a check's `load`)."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace

import pytest

from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.domain.errors import SecretsUnreadable
from signal_watcher.domain.model import Header, Method, Status
from signal_watcher.service_layer.ports import UnitOfWorkFactory
from tests.ports.signal_watcher.backends import (
    CopySecrets,
    MemoryBackend,
    PostgresBackend,
    ReadingWith,
    StoreContract,
    StoredSecrets,
    Tamper,
)
from tests.ports.signal_watcher.test_watcher_store import SPEC, add, claim
from tests.support.signal_watcher_fixtures import cipher_for

HEADER = Header("Authorization", "Bearer sekret-token-123")
SECRET_SPEC = replace(SPEC, headers=(HEADER,), method=Method.POST, body="body-sekret-456")


async def refused(units: UnitOfWorkFactory, watcher_id: uuid.UUID) -> tuple[str, str]:
    """The codes a read and a listing answer, and the `secrets_error` a check's claim reports."""
    async with units() as uow:
        with pytest.raises(SecretsUnreadable) as read:
            await uow.watchers.get("alice", watcher_id)
        with pytest.raises(SecretsUnreadable) as listed:
            await uow.watchers.list_for_user("alice", limit=10)
    assert read.value.status == 500 and read.value.code == listed.value.code
    [claimed] = await claim(units)
    loaded = claimed.record
    assert loaded.id == watcher_id and (loaded.spec.headers, loaded.spec.body) == ((), None)
    assert loaded.secrets_error is not None
    return read.value.code, loaded.secrets_error


class WatcherSecretsContract(StoreContract):
    async def test_secrets_are_stored_sealed_and_read_back(
        self, units: UnitOfWorkFactory, stored_secrets: StoredSecrets
    ) -> None:
        created = await add(units, headers=SECRET_SPEC.headers, body=SECRET_SPEC.body)
        stored = await stored_secrets(created.id)
        for plain in (b"sekret-token-123", b"body-sekret-456", b"Authorization"):
            assert plain not in stored
        assert (created.spec.headers, created.spec.body) == ((HEADER,), "body-sekret-456")
        async with units() as uow:
            edited = replace(SECRET_SPEC, headers=(Header("X-Token", "edited-77"),), body="other-88")
            await uow.watchers.update_spec("alice", created.id, edited, reset_baseline=False)
            record = await uow.watchers.get("alice", created.id)
        assert record is not None and (record.spec.headers, record.spec.body) == (edited.headers, "other-88")
        assert b"edited-77" not in await stored_secrets(created.id)

    async def test_the_same_secrets_seal_differently(
        self, units: UnitOfWorkFactory, stored_secrets: StoredSecrets
    ) -> None:
        first, second = await add(units), await add(units)
        assert await stored_secrets(first.id) != await stored_secrets(second.id)

    async def test_a_ring_without_the_writers_key_refuses_with_secret_key_unknown(
        self, units: UnitOfWorkFactory, units_reading_with: ReadingWith
    ) -> None:
        created = await add(units)
        other: SecretCipher = cipher_for(os.urandom(32), key_id="k9")
        assert await refused(units_reading_with(other), created.id) == ("secret_key_unknown",) * 2

    async def test_a_damaged_ciphertext_refuses_with_secret_unreadable(
        self, units: UnitOfWorkFactory, tamper: Tamper
    ) -> None:
        created = await add(units)
        await tamper(created.id)
        assert await refused(units, created.id) == ("secret_unreadable",) * 2

    async def test_secrets_are_bound_to_their_watcher(
        self, units: UnitOfWorkFactory, copy_secrets: CopySecrets
    ) -> None:
        source = await add(units, "bob")
        target = await add(units)
        async with units() as uow:
            await uow.watchers.set_status("bob", source.id, Status.PAUSED)  # only the target is due
        await copy_secrets(source.id, target.id)
        assert await refused(units, target.id) == ("secret_unreadable",) * 2


class TestPostgresWatcherSecrets(PostgresBackend, WatcherSecretsContract):
    pass


class TestMemoryWatcherSecrets(MemoryBackend, WatcherSecretsContract):
    pass
