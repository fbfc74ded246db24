"""The projection store (`ProjectionStore`): claims and ownership evidence per server, PostgreSQL and the
fake alike."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.domain.records import DeviceClaim, OwnershipEvidence
from tests.ports.orphan_scanner.conftest import Memory, OnPostgres, UnitOfWorkFactory

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
A = uuid.UUID("00000000-0000-4000-8000-00000000000a")
B = uuid.UUID("00000000-0000-4000-8000-00000000000b")


def on(server: str, name: str) -> ServerPath:
    return ServerPath(server, name)


def claim(
    device: uuid.UUID, path: str, state: str, version: int, server: str | None = "mtx-a"
) -> DeviceClaim:
    return DeviceClaim(
        device_id=device,
        tenant_id="tenant-a",
        site_id="site-1",
        path_name=path,
        media_server_id=server,
        desired_state=state,
        config_version=version,
        event_id=uuid.uuid4(),
        occurred_at=T0,
    )


def evidence(
    device: uuid.UUID, path: str, first: timedelta, last: timedelta, server: str = "mtx-a"
) -> OwnershipEvidence:
    return OwnershipEvidence(
        path_name=path,
        media_server_id=server,
        device_id=device,
        tenant_id="tenant-a",
        site_id="site-1",
        first_seen_at=T0 + first,
        last_seen_at=T0 + last,
    )


async def claimed(uow: UnitOfWorkFactory, *paths: ServerPath) -> set[ServerPath]:
    async with uow() as u:
        return await u.projection.claimed_paths(paths)


async def owners(uow: UnitOfWorkFactory, *paths: ServerPath) -> dict[ServerPath, uuid.UUID]:
    async with uow() as u:
        return await u.projection.last_owners(paths)


class ProjectionStoreContract:
    """Each adapter gives `uow` (conftest)."""

    async def test_an_enabled_claim_claims_its_path_on_its_server_only(self, uow: UnitOfWorkFactory) -> None:
        async with uow() as u:
            await u.projection.apply_claim(claim(A, "cam-1", "enabled", 1, "mtx-a"))
            await u.projection.apply_claim(claim(B, "cam-2", "disabled", 1, "mtx-a"))
        asked = (on("mtx-a", "cam-1"), on("mtx-b", "cam-1"), on("mtx-a", "cam-2"), on("mtx-a", "cam-3"))
        assert await claimed(uow, *asked) == {on("mtx-a", "cam-1")}
        assert await claimed(uow) == set()

    async def test_a_claim_without_a_server_claims_the_name_on_every_server(
        self, uow: UnitOfWorkFactory
    ) -> None:
        async with uow() as u:
            await u.projection.apply_claim(claim(A, "legacy/cam", "enabled", 1, None))
        asked = (on("mtx-a", "legacy/cam"), on("mtx-b", "legacy/cam"), on("mtx-b", "legacy"))
        assert await claimed(uow, *asked) == {on("mtx-a", "legacy/cam"), on("mtx-b", "legacy/cam")}

    async def test_a_claim_never_moves_back_to_an_older_version(self, uow: UnitOfWorkFactory) -> None:
        path = on("mtx-a", "cam-1")
        async with uow() as u:
            await u.projection.apply_claim(claim(A, "cam-1", "disabled", 2))
            await u.projection.apply_claim(claim(A, "cam-1", "enabled", 1))  # older: ignored
        assert await claimed(uow, path) == set()
        async with uow() as u:
            await u.projection.apply_claim(claim(A, "cam-1", "enabled", 2))  # the same version replaces
        assert await claimed(uow, path) == {path}
        async with uow() as u:
            await u.projection.apply_claim(claim(A, "cam-9", "enabled", 3, "mtx-b"))  # moved: path and server
        assert await claimed(uow, path, on("mtx-b", "cam-9")) == {on("mtx-b", "cam-9")}

    async def test_the_last_owner_is_the_device_seen_last_on_that_server(
        self, uow: UnitOfWorkFactory
    ) -> None:
        async with uow() as u:
            await u.projection.record_ownership(evidence(A, "cam-1", timedelta(0), timedelta(hours=2)))
            await u.projection.record_ownership(evidence(B, "cam-1", timedelta(hours=1), timedelta(hours=3)))
            await u.projection.record_ownership(
                evidence(A, "cam-1", timedelta(0), timedelta(hours=9), "mtx-b")
            )
        asked = (on("mtx-a", "cam-1"), on("mtx-b", "cam-1"), on("mtx-c", "cam-1"), on("mtx-a", "cam-2"))
        assert await owners(uow, *asked) == {on("mtx-a", "cam-1"): B, on("mtx-b", "cam-1"): A}
        async with uow() as u:  # later evidence for A: A is the last owner again
            await u.projection.record_ownership(evidence(A, "cam-1", timedelta(hours=4), timedelta(hours=5)))
        assert await owners(uow, on("mtx-a", "cam-1")) == {on("mtx-a", "cam-1"): A}

    async def test_evidence_only_widens_its_time_span(self, uow: UnitOfWorkFactory) -> None:
        async with uow() as u:
            await u.projection.record_ownership(evidence(A, "cam-1", timedelta(hours=1), timedelta(hours=5)))
            await u.projection.record_ownership(evidence(B, "cam-1", timedelta(hours=1), timedelta(hours=4)))
            # older evidence for A: its last sighting stays at 5 h, so A stays the last owner
            await u.projection.record_ownership(evidence(A, "cam-1", timedelta(0), timedelta(hours=2)))
        assert await owners(uow, on("mtx-a", "cam-1")) == {on("mtx-a", "cam-1"): A}

    async def test_equally_late_owners_resolve_to_the_smallest_device_id(
        self, uow: UnitOfWorkFactory
    ) -> None:
        async with uow() as u:
            await u.projection.record_ownership(evidence(B, "cam-1", timedelta(0), timedelta(hours=1)))
            await u.projection.record_ownership(evidence(A, "cam-1", timedelta(0), timedelta(hours=1)))
        assert await owners(uow, on("mtx-a", "cam-1")) == {on("mtx-a", "cam-1"): A}

    async def test_what_a_failed_transaction_wrote_is_gone(self, uow: UnitOfWorkFactory) -> None:
        with pytest.raises(RuntimeError):
            await claim_then_fail(uow)
        assert await claimed(uow, on("mtx-a", "cam-1")) == set()
        assert await owners(uow, on("mtx-a", "cam-1")) == {}


async def claim_then_fail(uow: UnitOfWorkFactory) -> None:
    async with uow() as u:
        await u.projection.apply_claim(claim(A, "cam-1", "enabled", 1))
        await u.projection.record_ownership(evidence(A, "cam-1", timedelta(0), timedelta(hours=1)))
        raise RuntimeError("the consumer's batch failed")


class TestPostgresProjectionStore(OnPostgres, ProjectionStoreContract):
    pass


class TestMemoryProjectionStore(Memory, ProjectionStoreContract):
    pass
