"""One device-audit fact, two channels: the signed HTTP item and the DeviceAuditRecorded Kafka event are
the same canonical fact with one digest, built and read only through `yovision_platform.audit_push`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from yovision_platform import audit_push
from yovision_platform.audit_push import (
    ValidFact,
    audit_event_parts,
    epoch_millis,
    fact_document,
    fact_from_audit_event,
    fact_time,
    validate_item,
)
from yovision_platform.messaging import AvroSerde, EventCatalog, build_event

EVENT_ID = uuid.UUID("3f0e1c2b-4a5d-4e6f-8a7b-9c0d1e2f3a4b")


def document(version: int, occurred_at: datetime) -> dict[str, object]:
    return fact_document(
        fact_version=version,
        event_id=EVENT_ID,
        occurred_at=occurred_at,
        tenant_id="tenant-a",
        site_id="site-1",
        device_id="5a1f0c2d-3e4b-4a5c-8d6e-7f8091a2b3c4",
        action="device.created",
        actor="operator:alice",
        changed_fields=["name", "path_name", "source_uri"],
        config_version=4,
    )


def via_kafka(serde: AvroSerde, fact: dict[str, object]) -> ValidFact:
    parts = audit_event_parts(fact)
    record = build_event(
        serde,
        audit_push.EVENT_TYPE,
        str(fact["device_id"]),
        parts.payload,
        event_id=parts.event_id,
        occurred_at_ms=parts.occurred_at_ms,
        correlation_id=parts.correlation_id,
    )
    decoded = serde.decode(record.value)
    read = fact_from_audit_event(decoded.record)
    assert isinstance(read, ValidFact)
    return read


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("microsecond", [0, 1_000, 999_000, 123_000])
def test_a_fact_at_whole_milliseconds_has_one_digest_on_both_channels(
    serde: AvroSerde, version: int, microsecond: int
) -> None:
    occurred_at = datetime(2026, 12, 1, 8, 30, 15, microsecond, tzinfo=UTC)
    http = validate_item(document(version, occurred_at))
    assert isinstance(http, ValidFact)
    kafka = via_kafka(serde, document(version, occurred_at))
    assert kafka.document == http.document
    assert kafka.digest == http.digest


def test_a_fact_with_microseconds_cannot_be_put_on_kafka(serde: AvroSerde) -> None:
    fact = document(2, datetime(2026, 12, 1, 8, 30, 15, 123_456, tzinfo=UTC))
    with pytest.raises(ValueError, match="milliseconds"):
        audit_event_parts(fact)


def test_fact_time_truncates_to_whole_milliseconds_in_utc() -> None:
    local = datetime(2026, 12, 1, 10, 0, 0, 999_999, tzinfo=timezone(timedelta(hours=2)))
    assert fact_time(local) == datetime(2026, 12, 1, 8, 0, 0, 999_000, tzinfo=UTC)
    assert fact_time(datetime(2026, 12, 1, 8, 0, 0, 1_000, tzinfo=UTC)).microsecond == 1_000


@pytest.mark.parametrize(
    ("moment", "millis"),
    [
        (datetime(1970, 1, 1, tzinfo=UTC), 0),
        (datetime(1970, 1, 1, 0, 0, 0, 999, tzinfo=UTC), 0),
        (datetime(1970, 1, 1, 0, 0, 0, 1_000, tzinfo=UTC), 1),
        (datetime(2286, 11, 20, 17, 46, 39, 999_000, tzinfo=UTC), 9_999_999_999_999),
    ],
)
def test_epoch_millis_is_exact(moment: datetime, millis: int) -> None:
    assert epoch_millis(moment) == millis


def test_the_contract_source_system_is_the_catalogue_owner_of_the_audit_event(catalog: EventCatalog) -> None:
    assert catalog.source_system_of(audit_push.EVENT_TYPE) == audit_push.SOURCE_SYSTEM


def test_a_producer_cannot_put_a_fact_the_contract_refuses_on_kafka() -> None:
    with pytest.raises(ValueError, match="fact_version"):
        document(3, datetime(2026, 12, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="invalid_field"):
        audit_event_parts(
            fact_document(
                fact_version=2,
                event_id=EVENT_ID,
                occurred_at=datetime(2026, 12, 1, tzinfo=UTC),
                tenant_id="tenant a",
                site_id="site-1",
                device_id="d",
                action="device.created",
                actor="alice",
                changed_fields=[],
                config_version=1,
            )
        )
