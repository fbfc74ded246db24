"""Pure record mapping of the ownership projection: Sense event records -> claims and ownership evidence."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from orphan_scanner.domain.projected_events import DEVICE_EVENT_TYPES, OWNERSHIP_EVENT_TYPE
from orphan_scanner.service_layer.projection import DESIRED_STATES, device_claim, ownership_evidence
from yovision_platform.messaging import EventRejected

EVENT_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")
DEVICE_ID = uuid.UUID("6c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e")
T0 = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)


def device_record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "envelope": {"event_id": str(EVENT_ID), "occurred_at": T0},
        "device_id": str(DEVICE_ID),
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "name": "Lobby camera",
        "path_name": "tenant-a-site-1-cam",
        "desired_state": "enabled",
        "config_version": 3,
    }
    record.update(changes)
    return record


def ownership_record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "path_name": "tenant-a-site-1-cam",
        "device_id": str(DEVICE_ID),
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "first_seen_at": T0,
        "last_seen_at": T0 + timedelta(minutes=1),
    }
    record.update(changes)
    return record


def rejected_code(call: Any, *args: Any) -> str:
    with pytest.raises(EventRejected) as caught:
        call(*args)
    return caught.value.code


def test_accepted_event_types_and_states() -> None:
    assert (
        frozenset({"DeviceRegistered", "DeviceConfigChanged", "DeviceDesiredStateChanged"})
        == DEVICE_EVENT_TYPES
    )
    assert OWNERSHIP_EVENT_TYPE == "PathOwnershipRecorded"
    assert frozenset({"enabled", "disabled"}) == DESIRED_STATES


def test_device_claim_maps_every_field() -> None:
    claim = device_claim(EVENT_ID, device_record())
    assert claim.device_id == DEVICE_ID
    assert (claim.tenant_id, claim.site_id) == ("tenant-a", "site-1")
    assert claim.path_name == "tenant-a-site-1-cam"
    assert claim.desired_state == "enabled"
    assert claim.config_version == 3
    assert claim.event_id == EVENT_ID
    assert claim.occurred_at == T0


def test_device_claim_accepts_a_uuid_object_and_disabled_state() -> None:
    claim = device_claim(EVENT_ID, device_record(device_id=DEVICE_ID, desired_state="disabled"))
    assert claim.device_id == DEVICE_ID
    assert claim.desired_state == "disabled"


def test_any_aware_timezone_is_accepted() -> None:
    plus_two = datetime(2026, 11, 30, 5, 0, tzinfo=timezone(timedelta(hours=2)))
    claim = device_claim(EVENT_ID, device_record(envelope={"occurred_at": plus_two}))
    assert claim.occurred_at == T0


@pytest.mark.parametrize(
    "changes",
    [
        {"desired_state": "ENABLED"},
        {"desired_state": "deleted"},
        {"desired_state": ""},
        {"desired_state": None},
        {"device_id": "dev-0001"},
        {"device_id": ""},
        {"device_id": "6c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5"},
        {"envelope": {"occurred_at": datetime(2026, 11, 30, 3, 0)}},  # naive
        {"envelope": {"occurred_at": 1764471600000}},  # raw millis, not decoded
        {"envelope": {"occurred_at": "2026-11-30T03:00:00+00:00"}},
        {"envelope": {"occurred_at": None}},
    ],
)
def test_bad_device_records_are_rejected_as_invalid_field(changes: dict[str, Any]) -> None:
    assert rejected_code(device_claim, EVENT_ID, device_record(**changes)) == "invalid_field"


def test_ownership_evidence_maps_every_field() -> None:
    evidence = ownership_evidence(ownership_record())
    assert evidence.path_name == "tenant-a-site-1-cam"
    assert evidence.device_id == DEVICE_ID
    assert (evidence.tenant_id, evidence.site_id) == ("tenant-a", "site-1")
    assert evidence.first_seen_at == T0
    assert evidence.last_seen_at == T0 + timedelta(minutes=1)


def test_ownership_first_equal_to_last_is_accepted() -> None:
    evidence = ownership_evidence(ownership_record(last_seen_at=T0))
    assert evidence.first_seen_at == evidence.last_seen_at == T0


@pytest.mark.parametrize(
    "changes",
    [
        {"last_seen_at": T0 - timedelta(milliseconds=1)},
        {"last_seen_at": T0 - timedelta(days=1)},
        {"first_seen_at": datetime(2026, 11, 30, 3, 0)},
        {"last_seen_at": datetime(2026, 11, 30, 3, 1)},
        {"first_seen_at": 1764471600000},
        {"last_seen_at": "2026-11-30T03:01:00Z"},
        {"device_id": "not-a-uuid"},
        {"device_id": None},
    ],
)
def test_bad_ownership_records_are_rejected_as_invalid_field(changes: dict[str, Any]) -> None:
    assert rejected_code(ownership_evidence, ownership_record(**changes)) == "invalid_field"


def test_rejection_does_not_chain_the_parse_error() -> None:
    with pytest.raises(EventRejected) as caught:
        ownership_evidence(ownership_record(device_id="not-a-uuid"))
    assert caught.value.__cause__ is None
    assert "not-a-uuid" not in str(caught.value)


def test_claims_and_evidence_carry_the_media_server() -> None:
    assert device_claim(EVENT_ID, device_record(media_server_id="mtx-b")).media_server_id == "mtx-b"
    assert ownership_evidence(ownership_record(media_server_id="mtx-b")).media_server_id == "mtx-b"


def test_records_from_before_several_servers_claim_everywhere_and_evidence_the_default_server() -> None:
    assert device_claim(EVENT_ID, device_record()).media_server_id is None
    assert device_claim(EVENT_ID, device_record(media_server_id=None)).media_server_id is None
    assert ownership_evidence(ownership_record(media_server_id=None)).media_server_id == "default"


@pytest.mark.parametrize("server", ["", "MTX", "http://10.0.0.1:9997", "a" * 33, 7])
def test_a_malformed_server_id_is_rejected(server: object) -> None:
    assert rejected_code(device_claim, EVENT_ID, device_record(media_server_id=server)) == "invalid_field"
    assert rejected_code(ownership_evidence, ownership_record(media_server_id=server)) == "invalid_field"
