"""Device-audit facts of contract ``sense-audit-relay-v1``: formats v1 and v2, validation, digest.

Pure: no I/O. The same models build and validate an HTTP batch item (JSON, strict) and the fact a
``DeviceAuditRecorded`` Kafka event carries (decoded Avro), so both channels of one fact yield the same
canonical document and digest, and Bell deduplicates them on ``(source_system, event_id)``.

Canonical document: the validated fact with ``event_id`` as lowercase hyphenated UUID text and
``occurred_at`` converted to UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``. Digest: SHA-256 of that document as
JSON with sorted keys, no whitespace, UTF-8 (:func:`canonical_json`). A fact's document is encoded by
orjson, which writes the same bytes for the only values a fact holds (strings, 64-bit integers, null, lists
of strings); :func:`canonical_json` keeps the stdlib encoder for any other document (orjson spells some
floats differently and refuses integers beyond 64 bits). The bytes of both are pinned by
``tests/unit/platform/test_audit_relay_canonical_bytes.py``.

One clock, one precision: a producer takes a fact's ``occurred_at`` once, from the database clock,
truncated to whole milliseconds (:func:`fact_time`), and puts that same instant in the outbox row and in the
Kafka envelope (whose ``occurred_at`` is epoch milliseconds, :func:`epoch_millis`). The contract's text form
keeps six fraction digits; for a canonical fact the last three are always ``000``.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

SOURCE_SYSTEM = "sense"  # the catalogue's owner of EVENT_TYPE (checked by tests/contract)
EVENT_TYPE = "DeviceAuditRecorded"

MAX_ID_CHARS = 128
MAX_ACTION_CHARS = 64
MAX_ACTOR_CHARS = 128
MAX_CHANGED_FIELDS = 64
MAX_FIELD_NAME_CHARS = 64
MAX_CORRELATION_ID_CHARS = 128
MAX_CONFIG_VERSION = 2**63 - 1
FACT_VERSION_1 = 1
FACT_VERSION_2 = 2
SUPPORTED_SCHEMA_VERSIONS = (FACT_VERSION_1, FACT_VERSION_2)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"
ACTION_PATTERN = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
ACTOR_PATTERN = r"^[A-Za-z0-9._:@-]+$"
FIELD_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
# The spelling of an id Bell accepts: RFC 9562's hyphenated 8-4-4-4-12 form, 36 characters. Hex digits are
# case-insensitive on input (RFC 9562; the canonical digest lowercases them). Braces, urn:uuid: and the
# hyphen-less form that Python's uuid.UUID also parses are `invalid_field`: a stricter enforcement of the
# contract's `format: uuid`, so one fact has one spelling on the wire.
CANONICAL_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

IdText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS, pattern=ID_PATTERN)]
ActionText = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_ACTION_CHARS, pattern=ACTION_PATTERN)
]
ActorText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ACTOR_CHARS, pattern=ACTOR_PATTERN)]
FieldName = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_FIELD_NAME_CHARS, pattern=FIELD_NAME_PATTERN)
]
CorrelationId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_CORRELATION_ID_CHARS, pattern=ID_PATTERN)
]


class ItemRejectCode(enum.StrEnum):
    """Stable per-item rejection codes. The first that applies wins, in this order: not_an_object (the item
    is not a JSON object), missing_field (no schema_version), unsupported_schema_version (not 1 or 2),
    missing_field, unknown_field (a field the format does not define), invalid_field (wrong type, length,
    pattern or range), id_conflict (this event_id is stored with another digest)."""

    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    UNKNOWN_FIELD = "unknown_field"
    INVALID_FIELD = "invalid_field"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    ID_CONFLICT = "id_conflict"


class _FactBase(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    event_id: uuid.UUID = Field(description="Id of the fact; Bell deduplicates on (sense, event_id).")
    occurred_at: AwareDatetime = Field(
        description="RFC 3339 date-time with an offset (Z or +hh:mm); stored in UTC, microsecond precision."
    )
    tenant_id: IdText
    site_id: IdText
    device_id: IdText
    action: ActionText = Field(
        description="What happened, lowercase dotted: device.created, device.config_changed, "
        "device.desired_state_changed, device.deleted; new actions need no new contract version."
    )
    actor: ActorText = Field(description="Operator or service identity; never a credential.")
    changed_fields: Annotated[list[FieldName], Field(max_length=MAX_CHANGED_FIELDS)] = Field(
        description="Names of the changed device fields, never their values."
    )

    @field_validator("event_id", mode="before")
    @classmethod
    def _canonical_event_id(cls, value: object) -> object:
        if isinstance(value, str) and CANONICAL_UUID.fullmatch(value) is None:
            raise ValueError("event_id must be a hyphenated 36-character UUID")
        return value

    @field_validator("occurred_at", mode="after")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        """The instant in UTC, as it is stored: RFC 3339 allows offsets up to 23:59, PostgreSQL's timestamptz
        input only up to 15:59 (a fact at +20:00 failed the whole batch with 503), and an instant before
        year 1 in UTC has no Python datetime."""
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError("occurred_at is outside years 1..9999 in UTC") from None


class DeviceAuditFactV1(_FactBase):
    """A device-audit fact, format 1."""

    model_config = ConfigDict(title="DeviceAuditFactV1")

    schema_version: Literal[1]


class DeviceAuditFactV2(_FactBase):
    """A device-audit fact, format 2: format 1 plus ``config_version`` and ``correlation_id``."""

    model_config = ConfigDict(title="DeviceAuditFactV2")

    schema_version: Literal[2]
    config_version: Annotated[int, Field(ge=0, le=MAX_CONFIG_VERSION)] = Field(
        description="Device config version after the change."
    )
    correlation_id: CorrelationId | None = Field(
        default=None, description="Id shared by all facts of one request; null when none."
    )


DeviceAuditFact = DeviceAuditFactV1 | DeviceAuditFactV2


@dataclass(frozen=True)
class ValidFact:
    """A validated fact with its canonical document and digest."""

    fact: DeviceAuditFact
    document: Mapping[str, Any]
    digest: bytes

    @property
    def event_id(self) -> uuid.UUID:
        return self.fact.event_id


@dataclass(frozen=True)
class RejectedItem:
    code: ItemRejectCode
    event_id: uuid.UUID | None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MILLISECOND = timedelta(milliseconds=1)


def canonical_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fact_time(moment: datetime) -> datetime:
    """``moment`` (timezone-aware) in UTC, truncated to whole milliseconds: a fact's ``occurred_at``."""
    utc = moment.astimezone(UTC)
    return utc.replace(microsecond=utc.microsecond - utc.microsecond % 1000)


def epoch_millis(moment: datetime) -> int:
    """Whole milliseconds since the Unix epoch (exact integer arithmetic, no float rounding)."""
    return (moment - _EPOCH) // _ONE_MILLISECOND


def is_fact_time(moment: datetime) -> bool:
    """True when ``moment`` is at the facts' precision (whole milliseconds)."""
    return moment.microsecond % 1000 == 0


def canonical_json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def digest_of(document: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(canonical_json(document)).digest()


def _valid(fact: DeviceAuditFact) -> ValidFact:
    document = fact.model_dump(mode="python")
    document["event_id"] = str(fact.event_id)
    document["occurred_at"] = canonical_timestamp(fact.occurred_at)
    # = canonical_json(document): a validated fact holds only pattern-checked ASCII text, integers within
    # 0..2**63-1, null and lists of such text, which both encoders write byte for byte alike.
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return ValidFact(fact, document, hashlib.sha256(canonical).digest())


_ERROR_PRIORITY = (
    ("missing", ItemRejectCode.MISSING_FIELD),
    ("extra_forbidden", ItemRejectCode.UNKNOWN_FIELD),
)


def _code_for(error: ValidationError) -> ItemRejectCode:
    types = {e["type"] for e in error.errors(include_url=False, include_input=False)}
    for error_type, code in _ERROR_PRIORITY:
        if error_type in types:
            return code
    return ItemRejectCode.INVALID_FIELD


def _model_for(item: Mapping[str, Any]) -> type[DeviceAuditFactV1] | type[DeviceAuditFactV2] | ItemRejectCode:
    if "schema_version" not in item:
        return ItemRejectCode.MISSING_FIELD
    version = item["schema_version"]
    if type(version) is not int or version not in SUPPORTED_SCHEMA_VERSIONS:
        return ItemRejectCode.UNSUPPORTED_SCHEMA_VERSION
    return DeviceAuditFactV1 if version == 1 else DeviceAuditFactV2


def _loose_event_id(item: Mapping[str, Any]) -> uuid.UUID | None:
    value = item.get("event_id")
    if not isinstance(value, str) or CANONICAL_UUID.fullmatch(value) is None:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _json_text(item: dict[str, Any]) -> bytes | str:
    """`item` as JSON text again, for pydantic's strict JSON mode (whose rules are the contract's: a UUID or
    a date-time as text, no number for a string). orjson where it can write the value; the stdlib where it
    cannot (an integer beyond 64 bits, a lone surrogate). Either text reads back as the same value."""
    try:
        return orjson.dumps(item)
    except orjson.JSONEncodeError:
        return json.dumps(item)


def validate_item(item: object) -> ValidFact | RejectedItem:
    """Validate one batch item (already JSON-decoded). Rejection code precedence, first match wins:
    not_an_object, missing_field (schema_version), unsupported_schema_version, missing_field,
    unknown_field, invalid_field."""
    if not isinstance(item, dict):
        return RejectedItem(ItemRejectCode.NOT_AN_OBJECT, None)
    model = _model_for(item)
    if isinstance(model, ItemRejectCode):
        return RejectedItem(model, _loose_event_id(item))
    try:
        fact = model.model_validate_json(_json_text(item), strict=True)
    except ValidationError as error:
        return RejectedItem(_code_for(error), _loose_event_id(item))
    return _valid(fact)


def fact_document(
    *,
    fact_version: int,
    event_id: uuid.UUID,
    occurred_at: datetime,
    tenant_id: str,
    site_id: str,
    device_id: str,
    action: str,
    actor: str,
    changed_fields: Sequence[str],
    config_version: int,
    correlation_id: str | None = None,
) -> dict[str, Any]:
    """The JSON object of one fact as a producer sends it (format 1 or 2, chosen by ``fact_version``).

    Format 1 has no ``config_version`` / ``correlation_id``. Only the shape is built here, nothing is
    validated: a relay sends a stored fact exactly as it was written (Bell's answer settles it), and a
    producer validates a new fact when it derives the Kafka form (:func:`audit_event_parts`). A new fact is
    timed by :func:`fact_time`; facts stored before that rule keep their microseconds."""
    if fact_version not in SUPPORTED_SCHEMA_VERSIONS:
        raise ValueError("fact_version must be 1 or 2")
    document: dict[str, Any] = {
        "schema_version": fact_version,
        "event_id": str(event_id),
        "occurred_at": canonical_timestamp(occurred_at),
        "tenant_id": tenant_id,
        "site_id": site_id,
        "device_id": device_id,
        "action": action,
        "actor": actor,
        "changed_fields": list(changed_fields),
    }
    if fact_version == FACT_VERSION_2:
        document["config_version"] = config_version
        document["correlation_id"] = correlation_id
    return document


def fact_from_audit_event(record: Mapping[str, Any]) -> ValidFact | RejectedItem:
    """The fact carried by a decoded ``DeviceAuditRecorded`` event (``fact_version`` 1 or 2)."""
    envelope = record["envelope"]
    occurred_at = envelope["occurred_at"]
    document: dict[str, Any] = {
        "schema_version": record["fact_version"],
        "event_id": str(envelope["event_id"]),
        "occurred_at": canonical_timestamp(occurred_at) if isinstance(occurred_at, datetime) else occurred_at,
        "tenant_id": record["tenant_id"],
        "site_id": record["site_id"],
        "device_id": record["device_id"],
        "action": record["action"],
        "actor": record["actor"],
        "changed_fields": list(record["changed_fields"]),
    }
    if record["fact_version"] == 2:
        document["config_version"] = record["config_version"]
        document["correlation_id"] = envelope.get("correlation_id")
    return validate_item(document)


@dataclass(frozen=True)
class AuditEventParts:
    """What a ``DeviceAuditRecorded`` event carries for one fact: the payload fields and the envelope
    values (event id, time in epoch milliseconds, correlation id). The inverse of
    :func:`fact_from_audit_event`."""

    payload: Mapping[str, Any]
    event_id: uuid.UUID
    occurred_at_ms: int
    correlation_id: str | None


def audit_event_parts(document: Mapping[str, Any]) -> AuditEventParts:
    """The Kafka form of a fact built by :func:`fact_document`; both forms have one digest. Raises
    ValueError for a fact not at whole milliseconds: the envelope could not carry its exact time."""
    checked = validate_item(dict(document))
    if isinstance(checked, RejectedItem):
        raise ValueError(f"fact refused by the contract: {checked.code.value}")
    fact = checked.fact
    if not is_fact_time(fact.occurred_at):
        raise ValueError("occurred_at must be a whole number of milliseconds")
    v2 = fact if isinstance(fact, DeviceAuditFactV2) else None
    payload = {
        "action": fact.action,
        "actor": fact.actor,
        "device_id": fact.device_id,
        "tenant_id": fact.tenant_id,
        "site_id": fact.site_id,
        "changed_fields": list(fact.changed_fields),
        # Format 1 has no config version, but the Avro field is required; readers ignore it for format 1.
        "config_version": v2.config_version if v2 else 0,
        "fact_version": fact.schema_version,
    }
    return AuditEventParts(
        payload=payload,
        event_id=fact.event_id,
        occurred_at_ms=epoch_millis(fact.occurred_at),
        correlation_id=v2.correlation_id if v2 else None,
    )
