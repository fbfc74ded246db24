"""`EventIngester` on the fakes: each ingested event type becomes one audit row (Kafka channel),
WatcherDisabled also an inbox entry; Sense's facts deduplicate with the signed push; a conflicting, invalid
or unknown event is rejected (dead-lettered by the consumer) with nothing written."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from bell_receiver.service_layer.ingest import INGESTED_EVENT_TYPES
from tests.support.audit_push_client import batch_body, fact, kafka_fields_of
from tests.support.stack import REPO_ROOT
from tests.unit.bell_receiver.conftest import Fakes, verified
from yovision_platform.messaging import AvroSerde, EventRejected, InboundEvent, SchemaRegistry, build_event

SAMPLES = REPO_ROOT / "schemas" / "avro" / "samples"
WHEN = datetime(2026, 11, 30, 1, 2, 3, 456000, tzinfo=UTC)


@pytest.fixture(scope="module")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


def inbound(serde: AvroSerde, event_type: str, key_field: str | None = None, **fields: Any) -> InboundEvent:
    """The event as the IdempotentConsumer hands it over: the committed sample, encoded and decoded."""
    record = json.loads((SAMPLES / f"{event_type}.json").read_text())
    envelope = record.pop("envelope")
    payload = record | fields
    key = payload[key_field] if key_field else envelope["aggregate_id"]
    event_id = payload.pop("event_id", None)
    built = build_event(
        serde,
        event_type,
        key,
        payload,
        envelope["source_system"],
        event_id=event_id,
        correlation_id=envelope["correlation_id"],
        occurred_at_ms=int(WHEN.timestamp() * 1000),
    )
    decoded = serde.decode(built.value)
    return InboundEvent(
        source_system=envelope["source_system"],
        event_id=uuid.UUID(str(decoded.record["envelope"]["event_id"])),
        event_type=event_type,
        record=decoded.record,
        digest=b"\x00" * 32,
        topic="test.v1",
        partition=0,
        offset=0,
        key=key.encode(),
    )


async def ingest(fakes: Fakes, event: InboundEvent) -> None:
    await fakes.use_cases().ingester.handle(fakes.uow, event)


@pytest.mark.parametrize(
    ("event_type", "key_field", "action", "actor"),
    [
        ("ScanReported", "scan_id", "orphan.scan_reported", None),
        ("PathDisposed", "scan_id", "orphan.path_disposed", "alice"),
        ("MaterialUploaded", "material_id", "media.material_uploaded", "user-3"),
        ("TranscodeFailed", "material_id", "media.transcode_failed", None),
    ],
)
async def test_another_services_event_becomes_one_audit_row(
    fakes: Fakes, serde: AvroSerde, event_type: str, key_field: str, action: str, actor: str | None
) -> None:
    event = inbound(serde, event_type, key_field)
    await ingest(fakes, event)
    [stored] = await fakes.stored()
    assert (stored.source_system, stored.event_id, stored.event_type, stored.channel) == (
        event.source_system,
        event.event_id,
        event_type,
        "kafka",
    )
    assert (stored.action, stored.actor, stored.occurred_at) == (action, actor, WHEN)
    assert stored.payload["event_type"] == event_type and "envelope" not in stored.payload
    assert fakes.metric("bell_ingest_events_total", outcome="stored") == 1


async def test_a_watcher_disabled_event_lands_in_the_trail_and_the_users_inbox(
    fakes: Fakes, serde: AvroSerde
) -> None:
    event = inbound(serde, "WatcherDisabled", "watcher_id", user_id="user-3", watcher_name="newer")
    await ingest(fakes, event)
    await ingest(fakes, event)  # a redelivery past the consumer's dedupe adds nothing
    [stored] = await fakes.stored()
    assert (stored.action, stored.actor) == ("signal.watcher_disabled", "user-3")
    [entry] = fakes.uow.inbox.rows
    assert (entry.user_id, entry.kind, entry.event_id, entry.occurred_at) == (
        "user-3",
        "WATCHER_DISABLED",
        event.event_id,
        WHEN,
    )
    assert dict(entry.data) == {
        "watcher_id": "watcher-12",
        "watcher_name": "newer",
        "consecutive_failures": 5,
        "last_error_code": "probe_timeout",
    }
    assert fakes.metric("bell_ingest_events_total", outcome="stored") == 1
    assert fakes.metric("bell_ingest_events_total", outcome="already_stored") == 1


def same_fact_as(relayed: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return kafka_fields_of(relayed) | changes | {"event_id": uuid.UUID(relayed["event_id"])}


async def test_sense_facts_deduplicate_with_the_signed_push(fakes: Fakes, serde: AvroSerde) -> None:
    relayed = fact(2, occurred_at="2026-11-30T01:02:03.456Z")
    body = batch_body([relayed])
    await fakes.use_cases().audit_batches.receive(verified(body), body)
    await ingest(fakes, inbound(serde, "DeviceAuditRecorded", **same_fact_as(relayed)))
    with pytest.raises(EventRejected) as conflict:
        await ingest(
            fakes, inbound(serde, "DeviceAuditRecorded", **same_fact_as(relayed, actor="operator:eve"))
        )
    assert conflict.value.code == "id_conflict"
    [stored] = await fakes.stored()
    assert (stored.channel, stored.actor) == ("http_relay", "operator:alice")
    assert fakes.metric("bell_ingest_events_total", outcome="already_stored") == 1
    assert fakes.metric("bell_ingest_events_total", outcome="id_conflict") == 1


async def test_a_new_sense_fact_from_kafka_is_stored(fakes: Fakes, serde: AvroSerde) -> None:
    event = inbound(serde, "DeviceAuditRecorded")
    await ingest(fakes, event)
    [stored] = await fakes.stored()
    assert (stored.source_system, stored.event_id, stored.action, stored.channel) == (
        "sense",
        event.event_id,
        "device.config_changed",
        "kafka",
    )


@pytest.mark.parametrize(
    ("event_type", "fields", "source", "code"),
    [
        ("DeviceAuditRecorded", {"actor": "not a valid actor"}, None, "invalid_fact"),
        ("DeviceAuditRecorded", {}, "media", "invalid_fact"),
        ("WatcherTriggered", {}, None, "unsupported_event_type"),
    ],
)
async def test_an_event_bell_cannot_store_is_rejected_and_writes_nothing(
    fakes: Fakes, serde: AvroSerde, event_type: str, fields: dict[str, Any], source: str | None, code: str
) -> None:
    event = inbound(serde, event_type, **fields)
    if source is not None:
        event = InboundEvent(**{**event.__dict__, "source_system": source})
    with pytest.raises(EventRejected) as rejected:
        await ingest(fakes, event)
    assert rejected.value.code == code
    assert await fakes.stored() == [] and fakes.uow.inbox.rows == []
    assert fakes.metric("bell_ingest_events_total", outcome=code) == 1


def test_watcher_triggered_is_deliberately_not_ingested() -> None:
    assert "WatcherTriggered" not in INGESTED_EVENT_TYPES
