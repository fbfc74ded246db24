"""The scan singleton's lease (`ScanLease`): fenced on owner, token and expiry, with the next scan's due
time; PostgreSQL and the fake alike."""

from __future__ import annotations

import pytest

from tests.ports.orphan_scanner.conftest import Backdoor, Memory, OnPostgres, UnitOfWorkFactory
from yovision_platform.errors import LeaseLost
from yovision_platform.storage import Lease

LEASE_SECONDS = 30.0


async def claim(uow: UnitOfWorkFactory, owner: str, *, due_only: bool) -> Lease | None:
    async with uow() as u:
        return await u.scan_lease.claim(owner, lease_seconds=LEASE_SECONDS, due_only=due_only)


async def release(uow: UnitOfWorkFactory, lease: Lease, next_scan_in_seconds: float = 3600.0) -> None:
    async with uow() as u:
        await u.scan_lease.release(lease, next_scan_in_seconds=next_scan_in_seconds)


class ScanLeaseContract:
    """Each adapter gives `uow` and `backdoor` (conftest)."""

    @pytest.mark.parametrize("due_only", [True, False])
    async def test_a_free_lease_is_claimed_and_then_held(
        self, uow: UnitOfWorkFactory, due_only: bool
    ) -> None:
        lease = await claim(uow, "one", due_only=due_only)  # a new schema: the first scan is due at once
        assert lease is not None and lease.owner == "one"
        assert await claim(uow, "two", due_only=False) is None
        assert await claim(uow, "two", due_only=True) is None
        assert await claim(uow, "one", due_only=False) is None  # held by a scan of the same instance

    async def test_a_release_frees_the_lease_and_sets_the_next_due_time(self, uow: UnitOfWorkFactory) -> None:
        lease = await claim(uow, "one", due_only=True)
        assert lease is not None
        await release(uow, lease, next_scan_in_seconds=3600.0)
        assert await claim(uow, "two", due_only=True) is None  # not due for an hour
        manual = await claim(uow, "two", due_only=False)  # a manual scan takes a free lease any time
        assert manual is not None and manual.owner == "two" and manual.token != lease.token
        await release(uow, manual, next_scan_in_seconds=0.0)
        assert await claim(uow, "three", due_only=True) is not None  # due now

    @pytest.mark.parametrize("taken_over", [True, False])
    async def test_an_expired_lease_is_fenced_off_taken_over_or_not(
        self, uow: UnitOfWorkFactory, backdoor: Backdoor, taken_over: bool
    ) -> None:
        paused = await claim(uow, "paused", due_only=True)
        assert paused is not None
        await backdoor.expire_lease()
        successor = await claim(uow, "successor", due_only=False) if taken_over else None
        assert (successor is not None) == taken_over
        with pytest.raises(LeaseLost):
            await release(uow, paused)
        if successor is not None:
            await release(uow, successor)  # the successor's own release still works

    async def test_a_lease_is_released_once(self, uow: UnitOfWorkFactory) -> None:
        lease = await claim(uow, "one", due_only=True)
        assert lease is not None
        await release(uow, lease, next_scan_in_seconds=0.0)
        with pytest.raises(LeaseLost):
            await release(uow, lease)

    async def test_a_release_in_a_failed_transaction_is_undone(self, uow: UnitOfWorkFactory) -> None:
        lease = await claim(uow, "one", due_only=True)
        assert lease is not None
        with pytest.raises(RuntimeError):
            await release_then_fail(uow, lease)
        assert await claim(uow, "two", due_only=False) is None  # still held
        await release(uow, lease)


async def release_then_fail(uow: UnitOfWorkFactory, lease: Lease) -> None:
    async with uow() as u:
        await u.scan_lease.release(lease, next_scan_in_seconds=0.0)
        raise RuntimeError("the report could not be written")


class TestPostgresScanLease(OnPostgres, ScanLeaseContract):
    pass


class TestMemoryScanLease(Memory, ScanLeaseContract):
    pass
