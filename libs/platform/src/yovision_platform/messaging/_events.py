"""Event envelopes, the event catalogue, and the producer boundary ``build_event``.

The catalogue (``schemas/avro/catalog.json``) says, per event type: schema file, topic, key field, owner
and schema version. ``build_event`` turns (event type, aggregate id, payload) into an ``EventRecord`` --
topic, key, single-object Avro value and headers -- which a service stores in its outbox in the same
transaction as the state change. Nothing here talks to Kafka or the database.

Keys: the Kafka key is the UTF-8 aggregate id, which must equal the payload's key field (``device_id``
for ``sense.device.v1``...), so all events of one aggregate stay in one partition, in order.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yovision_platform.messaging._avro import (
    AvroSerde,
    InvalidEventError,
    SchemaLoadError,
    SchemaRegistry,
    UnknownEventTypeError,
    default_schemas_dir,
)

__all__ = [
    "CATALOG_FILE_NAME",
    "HEADER_EVENT_ID",
    "HEADER_EVENT_TYPE",
    "HEADER_SOURCE_SYSTEM",
    "SOURCE_SYSTEMS",
    "CatalogEntry",
    "EventCatalog",
    "EventRecord",
    "TopicSpec",
    "build_event",
    "catalog_for",
    "default_catalog",
    "new_envelope",
]

SOURCE_SYSTEMS = frozenset({"sense", "orphan", "bell", "signal", "media", "platform"})
CATALOG_FILE_NAME = "catalog.json"
HEADER_EVENT_TYPE = "event_type"
HEADER_EVENT_ID = "event_id"
HEADER_SOURCE_SYSTEM = "source_system"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    owner: str
    partitions: int
    key: str
    description: str


@dataclass(frozen=True)
class CatalogEntry:
    event_type: str
    owner: str
    schema_file: str
    topic: str
    key_field: str
    schema_version: int


@dataclass(frozen=True)
class EventCatalog:
    envelope_schema_file: str
    topics: Mapping[str, TopicSpec]
    events: Mapping[str, CatalogEntry]

    @classmethod
    def load(cls, schemas_dir: Path | None = None) -> EventCatalog:
        directory = schemas_dir if schemas_dir is not None else default_schemas_dir()
        path = directory / CATALOG_FILE_NAME
        if not path.is_file():
            raise SchemaLoadError("catalog_invalid", f"{CATALOG_FILE_NAME} missing")
        return cls.from_json(path.read_text(encoding="utf-8"))

    @classmethod
    def from_json(cls, text: str) -> EventCatalog:
        try:
            document = json.loads(text)
            topics = {
                name: TopicSpec(
                    name=name,
                    owner=str(spec["owner"]),
                    partitions=int(spec["partitions"]),
                    key=str(spec["key"]),
                    description=str(spec.get("description", "")),
                )
                for name, spec in document["topics"].items()
            }
            events = {
                event_type: CatalogEntry(
                    event_type=event_type,
                    owner=str(spec["owner"]),
                    schema_file=str(spec["schema"]),
                    topic=str(spec["topic"]),
                    key_field=str(spec["key_field"]),
                    schema_version=int(spec["schema_version"]),
                )
                for event_type, spec in document["events"].items()
            }
            envelope_schema_file = str(document["envelope"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            raise SchemaLoadError("catalog_invalid", "malformed catalogue") from None
        catalog = cls(envelope_schema_file=envelope_schema_file, topics=topics, events=events)
        catalog._check_consistency()
        return catalog

    def entry(self, event_type: str) -> CatalogEntry:
        entry = self.events.get(event_type)
        if entry is None:
            raise UnknownEventTypeError(event_type)
        return entry

    def topic_of(self, event_type: str) -> str:
        """The logical topic that carries ``event_type``."""
        return self.entry(event_type).topic

    def topics_of(self, event_types: Iterable[str]) -> tuple[str, ...]:
        """The logical topics carrying any of ``event_types``, sorted, each once."""
        return tuple(sorted({self.topic_of(event_type) for event_type in event_types}))

    def source_system_of(self, event_type: str) -> str:
        """The service that owns (produces) ``event_type``: its envelopes' ``source_system``."""
        return self.entry(event_type).owner

    def event_types_for_topic(self, topic: str) -> list[str]:
        return sorted(e.event_type for e in self.events.values() if e.topic == topic)

    def verify_against(self, registry: SchemaRegistry) -> None:
        """Every event type names a current schema file whose record name is the event type and whose
        fields include the key field."""
        for entry in self.events.values():
            version = registry.for_event_type(entry.event_type)
            if version.source != entry.schema_file:
                raise SchemaLoadError("catalog_invalid", f"{entry.event_type}: schema file mismatch")
            field_names = {field["name"] for field in version.parsed["fields"]}
            if entry.key_field not in field_names:
                raise SchemaLoadError("catalog_invalid", f"{entry.event_type}: key field missing")

    def _check_consistency(self) -> None:
        for topic in self.topics.values():
            if topic.owner not in SOURCE_SYSTEMS or topic.partitions < 1:
                raise SchemaLoadError("catalog_invalid", f"topic {topic.name}")
        for entry in self.events.values():
            topic_spec = self.topics.get(entry.topic)
            if topic_spec is None or topic_spec.owner != entry.owner or entry.schema_version < 1:
                raise SchemaLoadError("catalog_invalid", f"event {entry.event_type}")


@functools.cache
def _load_verified_catalog(schemas_dir: Path, registry: SchemaRegistry) -> EventCatalog:
    catalog = EventCatalog.load(schemas_dir)
    catalog.verify_against(registry)
    return catalog


def default_catalog() -> EventCatalog:
    """The catalogue shipped with the platform's schemas (not re-checked against a registry)."""
    return _load_catalog(default_schemas_dir())


@functools.cache
def _load_catalog(schemas_dir: Path) -> EventCatalog:
    return EventCatalog.load(schemas_dir)


def catalog_for(serde: AvroSerde) -> EventCatalog:
    """The catalogue next to the serde's schemas, checked against them once per registry."""
    root = serde.registry.root if serde.registry.root is not None else default_schemas_dir()
    return _load_verified_catalog(root, serde.registry)


@dataclass(frozen=True)
class EventRecord:
    """What a producer hands to its outbox: Kafka topic, key, value and headers, plus ids for bookkeeping."""

    topic: str
    key: bytes
    event_type: str
    event_id: uuid.UUID
    source_system: str
    value: bytes
    headers: tuple[tuple[str, bytes], ...]

    @property
    def text_headers(self) -> tuple[tuple[str, str], ...]:
        """Headers as text pairs (every value here is ASCII), the form the outbox stores."""
        return tuple((name, value.decode("ascii")) for name, value in self.headers)


def new_envelope(
    event_type: str,
    source_system: str,
    aggregate_id: str,
    *,
    schema_version: int = 1,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    event_id: uuid.UUID | None = None,
    occurred_at_ms: int | None = None,
) -> dict[str, Any]:
    """An envelope with a random UUIDv4 event id and the current time in epoch milliseconds."""
    if source_system not in SOURCE_SYSTEMS:
        raise InvalidEventError("envelope.source_system")
    if not aggregate_id:
        raise InvalidEventError("envelope.aggregate_id")
    return {
        "event_id": str(event_id if event_id is not None else uuid.uuid4()),
        "event_type": event_type,
        "source_system": source_system,
        "aggregate_id": aggregate_id,
        "occurred_at": occurred_at_ms if occurred_at_ms is not None else time.time_ns() // 1_000_000,
        "schema_version": schema_version,
        "correlation_id": correlation_id,
        "causation_id": causation_id,
    }


def build_event(
    serde: AvroSerde,
    event_type: str,
    aggregate_id: str,
    payload: Mapping[str, Any],
    source_system: str | None = None,
    *,
    catalog: EventCatalog | None = None,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    event_id: uuid.UUID | None = None,
    occurred_at_ms: int | None = None,
) -> EventRecord:
    """Validate and encode one event. ``payload`` holds the event's fields except ``envelope``.

    The envelope's source system is the event type's owner in the catalogue; a caller that passes
    ``source_system`` asserts it. Raises UnknownEventTypeError for an event type outside the catalogue and
    InvalidEventError (naming the field) when ``source_system`` is not the event's owner, the key field
    differs from ``aggregate_id`` or the payload does not match the schema.
    """
    entry = (catalog if catalog is not None else catalog_for(serde)).entry(event_type)
    if source_system is None:
        source_system = entry.owner
    if source_system != entry.owner:
        raise InvalidEventError("envelope.source_system")
    if "envelope" in payload:
        raise InvalidEventError("envelope")
    if payload.get(entry.key_field) != aggregate_id:
        raise InvalidEventError(entry.key_field)
    envelope = new_envelope(
        event_type,
        source_system,
        aggregate_id,
        schema_version=entry.schema_version,
        correlation_id=correlation_id,
        causation_id=causation_id,
        event_id=event_id,
        occurred_at_ms=occurred_at_ms,
    )
    value = serde.encode(event_type, {"envelope": envelope, **payload})
    resolved_event_id = uuid.UUID(envelope["event_id"])
    return EventRecord(
        topic=entry.topic,
        key=aggregate_id.encode("utf-8"),
        event_type=event_type,
        event_id=resolved_event_id,
        source_system=source_system,
        value=value,
        headers=(
            (HEADER_EVENT_TYPE, event_type.encode("ascii")),
            (HEADER_EVENT_ID, str(resolved_event_id).encode("ascii")),
            (HEADER_SOURCE_SYSTEM, source_system.encode("ascii")),
        ),
    )
