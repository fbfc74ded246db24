"""`CheckStore`: both adapters order the check log newest first (ties by id), page it by keyset, count the
last hour's triggers by the store's clock, delete expired rows oldest first in bounded batches, and lose a
watcher's rows with the watcher."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest

from signal_watcher.domain.records import CheckRow
from signal_watcher.service_layer.ports import UnitOfWorkFactory
from tests.ports.signal_watcher.backends import MemoryBackend, PostgresBackend, StoreContract
from tests.ports.signal_watcher.test_watcher_store import add


def row(watcher_id: uuid.UUID, at: datetime, *, trigger: bool = False) -> CheckRow:
    return CheckRow(
        uuid.uuid4(), watcher_id, at, 200, "h", trigger, uuid.uuid4() if trigger else None, None, 5, None
    )


async def insert(units: UnitOfWorkFactory, rows: list[CheckRow]) -> None:
    async with units() as uow:
        for check in rows:
            await uow.checks.insert(check)


async def now_of(units: UnitOfWorkFactory) -> datetime:
    async with units() as uow:
        return await uow.now()


class CheckStoreContract(StoreContract):
    async def test_the_log_is_newest_first_with_ties_by_id_and_keyset_paged(
        self, units: UnitOfWorkFactory
    ) -> None:
        watcher, other = (await add(units)).id, (await add(units)).id
        base = await now_of(units)
        moments = [base, base, base + timedelta(microseconds=1), base + timedelta(seconds=1), base]
        rows = [row(watcher, m) for m in moments]
        await insert(units, [*rows, row(other, base)])
        expected = sorted(rows, key=lambda c: (c.checked_at, c.id), reverse=True)
        async with units() as uow:
            listed = await uow.checks.list_for_watcher(watcher, limit=10)
            before = (expected[1].checked_at, expected[1].id)
            rest = await uow.checks.list_for_watcher(watcher, limit=10, before=before)
            window = await uow.checks.list_for_watcher(watcher, limit=2, offset=2)
        assert listed == expected
        assert rest == expected[2:] and window == expected[2:4]

    @pytest.mark.parametrize("offset", [0, 1, 2, 3, 4])
    @pytest.mark.parametrize("with_cursor", [False, True])
    async def test_an_offset_skips_rows_before_the_keyset_position_or_from_the_newest(
        self, units: UnitOfWorkFactory, offset: int, with_cursor: bool
    ) -> None:
        """Five rows (three share a timestamp); `before` the second newest, then `offset` more: 0 and 1 at
        the edge, 3 exactly at the end (empty), 4 past it (empty); without `before`, from the newest."""
        watcher = (await add(units)).id
        base = await now_of(units)
        moments = [base, base, base, base + timedelta(seconds=1), base + timedelta(seconds=2)]
        expected = sorted(
            (row(watcher, m) for m in moments), key=lambda c: (c.checked_at, c.id), reverse=True
        )
        await insert(units, expected)
        before = (expected[1].checked_at, expected[1].id) if with_cursor else None
        start = 2 if with_cursor else 0
        async with units() as uow:
            page = await uow.checks.list_for_watcher(watcher, limit=2, offset=offset, before=before)
        assert page == expected[start + offset : start + offset + 2]

    async def test_triggers_of_the_last_hour_are_counted_by_the_stores_clock(
        self, units: UnitOfWorkFactory
    ) -> None:
        watcher, other = (await add(units)).id, (await add(units)).id
        now = await now_of(units)
        await insert(
            units,
            [
                row(watcher, now - timedelta(minutes=59), trigger=True),
                row(watcher, now - timedelta(minutes=1), trigger=True),
                row(watcher, now - timedelta(minutes=61), trigger=True),
                row(watcher, now - timedelta(minutes=5)),
                row(other, now - timedelta(minutes=5), trigger=True),
            ],
        )
        async with units() as uow:
            assert await uow.checks.triggers_in_last_hour(watcher) == 2
            assert await uow.checks.triggers_in_last_hour(uuid.uuid4()) == 0

    async def test_expired_rows_are_deleted_oldest_first_in_bounded_batches(
        self, units: UnitOfWorkFactory
    ) -> None:
        watcher = (await add(units)).id
        now = await now_of(units)
        expired = [row(watcher, now - timedelta(days=91 + n)) for n in range(25)]
        young = [row(watcher, now - timedelta(days=89)) for _ in range(3)]
        await insert(units, expired + young)
        deleted = []
        for _ in range(4):
            async with units() as uow:
                deleted.append(await uow.checks.delete_expired(retention_days=90, batch=10))
            if deleted == [10]:
                async with units() as uow:
                    left = {c.id for c in await uow.checks.list_for_watcher(watcher, limit=100)}
                assert left == {c.id for c in expired[:15] + young}  # the ten oldest went first
        assert deleted == [10, 10, 5, 0]
        async with units() as uow:
            assert {c.id for c in await uow.checks.list_for_watcher(watcher, limit=100)} == {
                c.id for c in young
            }

    async def test_a_watchers_rows_go_with_the_watcher(self, units: UnitOfWorkFactory) -> None:
        gone, kept = await add(units), await add(units)
        now = await now_of(units)
        await insert(units, [row(gone.id, now), row(gone.id, now), row(kept.id, now)])
        async with units() as uow:
            await uow.watchers.delete("alice", gone.id)
        async with units() as uow:
            assert await uow.checks.list_for_watcher(gone.id, limit=10) == []
            assert len(await uow.checks.list_for_watcher(kept.id, limit=10)) == 1


class TestPostgresCheckStore(PostgresBackend, CheckStoreContract):
    pass


class TestMemoryCheckStore(MemoryBackend, CheckStoreContract):
    pass
