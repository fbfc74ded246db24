"""The projection use case on the fake store: Sense's events become claims and ownership evidence; any other
type, source or malformed field is rejected (dead-lettered by the consumer) and writes nothing. (The
consumer itself, exactly-once per event id with positions in the same transaction, runs on real Kafka and
PostgreSQL: tests/integration/orphan_scanner/test_projection.py.)"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from orphan_scanner.adapters.memory import MemoryOrphanUnitOfWork
from orphan_scanner.domain.classify import ServerPath
from tests.support.orphan_world import world
from yovision_platform.messaging import EventRejected, InboundEvent

T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
DEVICE = uuid.UUID("6c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e")
CAM = ServerPath("mtx-a", "cam-1")


def inbound(event_type: str, record: dict[str, Any], source: str = "sense") -> InboundEvent:
    return InboundEvent(
        source_system=source,
        event_id=uuid.uuid4(),
        event_type=event_type,
        record=record,
        digest=b"d" * 32,
        topic="sense.device.v1",
        partition=0,
        offset=0,
        key=None,
    )


def device(state: str, version: int, **changes: Any) -> dict[str, Any]:
    return {
        "envelope": {"occurred_at": T0},
        "device_id": str(DEVICE),
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "path_name": "cam-1",
        "media_server_id": "mtx-a",
        "desired_state": state,
        "config_version": version,
        **changes,
    }


def ownership(**changes: Any) -> dict[str, Any]:
    return {
        "path_name": "cam-1",
        "media_server_id": "mtx-a",
        "device_id": str(DEVICE),
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "first_seen_at": T0,
        "last_seen_at": T0,
        **changes,
    }


@pytest.fixture
def uow() -> MemoryOrphanUnitOfWork:
    """The consumer's transaction (its unit of work, joined by the use case)."""
    return MemoryOrphanUnitOfWork()


async def test_device_events_follow_the_latest_version(uow: MemoryOrphanUnitOfWork) -> None:
    projection = world().projection
    await projection.apply(uow, inbound("DeviceRegistered", device("enabled", 1)))
    assert await uow.projection.claimed_paths([CAM]) == {CAM}
    await projection.apply(uow, inbound("DeviceDesiredStateChanged", device("disabled", 2)))
    assert await uow.projection.claimed_paths([CAM]) == set()
    await projection.apply(uow, inbound("DeviceConfigChanged", device("enabled", 1)))  # replayed, older
    assert await uow.projection.claimed_paths([CAM]) == set()
    await projection.apply(uow, inbound("DeviceConfigChanged", device("enabled", 3, path_name="cam-2")))
    assert await uow.projection.claimed_paths([CAM, ServerPath("mtx-a", "cam-2")]) == {
        ServerPath("mtx-a", "cam-2")
    }


async def test_ownership_events_record_evidence_per_server(uow: MemoryOrphanUnitOfWork) -> None:
    projection = world().projection
    await projection.apply(uow, inbound("PathOwnershipRecorded", ownership()))
    await projection.apply(uow, inbound("PathOwnershipRecorded", ownership(media_server_id=None)))
    default = ServerPath("default", "cam-1")
    assert await uow.projection.last_owners([CAM, default, ServerPath("mtx-b", "cam-1")]) == {
        CAM: DEVICE,
        default: DEVICE,
    }
    assert await uow.projection.claimed_paths([CAM]) == set()  # evidence is not a claim


@pytest.mark.parametrize(
    ("event_type", "record", "source", "code"),
    [
        ("DeviceDeleted", device("enabled", 1), "sense", "unsupported_event_type"),
        ("WatcherTriggered", {}, "signal", "unsupported_event_type"),
        ("DeviceRegistered", device("enabled", 1), "orphan", "unexpected_source_system"),
        ("PathOwnershipRecorded", ownership(), "media", "unexpected_source_system"),
        ("DeviceRegistered", device("deleted", 1), "sense", "invalid_field"),
        ("DeviceRegistered", device("enabled", 1, media_server_id="MTX"), "sense", "invalid_field"),
        ("PathOwnershipRecorded", ownership(device_id="not-a-uuid"), "sense", "invalid_field"),
        (
            "PathOwnershipRecorded",
            ownership(last_seen_at=datetime(2026, 1, 1, tzinfo=UTC)),
            "sense",
            "invalid_field",
        ),
    ],
)
async def test_anything_else_is_rejected_and_writes_nothing(
    uow: MemoryOrphanUnitOfWork, event_type: str, record: dict[str, Any], source: str, code: str
) -> None:
    with pytest.raises(EventRejected) as rejected:
        await world().projection.apply(uow, inbound(event_type, record, source))
    assert rejected.value.code == code
    assert (dict(uow.projection.claims), dict(uow.projection.evidence), uow.commits) == ({}, {}, 0)
