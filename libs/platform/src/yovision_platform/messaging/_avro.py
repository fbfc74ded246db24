"""Avro event contracts: a schema registry over ``schemas/avro`` and a single-object serde.

Wire format of every Kafka value (Avro spec, "Single object encoding")::

    0xC3 0x01 | CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form,
                8 bytes little-endian | Avro binary body

Schema files: every ``*.avsc`` under the schemas directory (outside ``_released/`` and ``samples/``)
defines one named type. A type may use a type from another file by its full name (every event uses
``com.yovision.events.platform.EventEnvelope``). The registry inlines such references, so each schema
becomes standalone: the fingerprint must cover the envelope too, and fastavro's canonical form of a
schema parsed with shared ``named_schemas`` would leave the envelope out.

``_released/<full name>.<fingerprint hex>.avsc`` keeps standalone copies of earlier versions (written by
``python -m yovision_platform.tools.schema_lock``), so messages of older writers still decode; they are
resolved to the current reader schema.

Errors carry a stable ``code``; messages name fields, never values::

    PlatformError (yovision_platform.errors)
    └── EventContractError
        ├── SchemaLoadError         schemas_dir_not_found | schema_invalid | unknown_named_type
        │                           | released_fingerprint_mismatch | catalog_invalid
        ├── UnknownEventTypeError   unknown_event_type
        ├── InvalidEventError       invalid_event (``field`` is the offending field path)
        └── DecodeError
            ├── NotSingleObjectError   not_single_object
            ├── UnknownSchemaError     unknown_schema
            ├── SchemaMismatchError    schema_incompatible
            └── MalformedEventError    malformed_event
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError
from fastavro.schema import fingerprint as fastavro_fingerprint
from fastavro.schema import parse_schema, to_parsing_canonical_form
from fastavro.validation import ValidationError, validate

from yovision_platform.errors import PlatformError
from yovision_platform.messaging._avro_fields import NAMED_TYPES, PRIMITIVE_TYPES, first_invalid_field

__all__ = [
    "CONTAINER_SCHEMAS_DIR",
    "FINGERPRINT_ALGORITHM",
    "RELEASED_DIR_NAME",
    "SAMPLES_DIR_NAME",
    "SCHEMAS_DIR_ENV",
    "SCHEMA_FILE_SUFFIX",
    "SINGLE_OBJECT_MAGIC",
    "AvroSerde",
    "DecodeError",
    "DecodedEvent",
    "EventContractError",
    "InvalidEventError",
    "MalformedEventError",
    "NotSingleObjectError",
    "SchemaLoadError",
    "SchemaMismatchError",
    "SchemaRegistry",
    "SchemaVersion",
    "UnknownEventTypeError",
    "UnknownSchemaError",
    "build_schema_versions",
    "default_schemas_dir",
    "first_invalid_field",
    "load_released_versions",
    "read_released_documents",
    "read_schema_documents",
    "released_file_name",
    "schema_fingerprint",
]

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
FINGERPRINT_SIZE_BYTES = 8
SINGLE_OBJECT_HEADER_SIZE_BYTES = len(SINGLE_OBJECT_MAGIC) + FINGERPRINT_SIZE_BYTES
FINGERPRINT_ALGORITHM = "CRC-64-AVRO"

SCHEMAS_DIR_ENV = "YOVISION_SCHEMAS_DIR"
CONTAINER_SCHEMAS_DIR = Path("/app/schemas/avro")
RELEASED_DIR_NAME = "_released"
SAMPLES_DIR_NAME = "samples"
SCHEMA_FILE_SUFFIX = ".avsc"


class EventContractError(PlatformError):
    """Base of every error of this module; ``code`` is stable, the message never holds field values."""

    def __init__(self, code: str, detail: str | None = None) -> None:
        # Exception.__init__ directly: the code is per instance here, not per class as in PlatformError.
        Exception.__init__(self, code if detail is None else f"{code}: {detail}")
        self.code = code
        self.detail = detail


class SchemaLoadError(EventContractError):
    """The schema files (or the catalogue) are missing or inconsistent."""


class UnknownEventTypeError(EventContractError):
    def __init__(self, event_type: str) -> None:
        super().__init__("unknown_event_type", event_type)
        self.event_type = event_type


class InvalidEventError(EventContractError):
    """A record does not match its schema; ``field`` is a path such as ``envelope.event_id``."""

    def __init__(self, field: str) -> None:
        super().__init__("invalid_event", field)
        self.field = field


class DecodeError(EventContractError):
    """Bytes that cannot be turned into an event."""


class NotSingleObjectError(DecodeError):
    def __init__(self) -> None:
        super().__init__("not_single_object")


class UnknownSchemaError(DecodeError):
    def __init__(self, fingerprint_hex: str) -> None:
        super().__init__("unknown_schema", fingerprint_hex)
        self.fingerprint_hex = fingerprint_hex


class SchemaMismatchError(DecodeError):
    def __init__(self, detail: str) -> None:
        super().__init__("schema_incompatible", detail)


class MalformedEventError(DecodeError):
    def __init__(self) -> None:
        super().__init__("malformed_event")


@dataclass(frozen=True, eq=False)
class SchemaVersion:
    """One version of one named type, standalone (referenced types inlined)."""

    full_name: str
    fingerprint: bytes
    canonical_form: str
    schema: dict[str, Any]
    parsed: dict[str, Any]
    source: str

    @property
    def name(self) -> str:
        return self.full_name.rsplit(".", 1)[-1]

    @property
    def fingerprint_hex(self) -> str:
        return self.fingerprint.hex()

    def to_json(self) -> str:
        return json.dumps(self.schema, indent=2, ensure_ascii=False) + "\n"


@dataclass(frozen=True, eq=False)
class DecodedEvent:
    """A decoded event. ``record`` follows fastavro's logical types: ``uuid.UUID`` for uuid strings,
    timezone-aware ``datetime`` for timestamp-millis."""

    event_type: str
    full_name: str
    writer_fingerprint: str
    record: dict[str, Any]

    @property
    def envelope(self) -> Mapping[str, Any]:
        envelope = self.record.get("envelope")
        return envelope if isinstance(envelope, Mapping) else {}

    @property
    def event_id(self) -> str:
        return str(self.envelope.get("event_id", ""))

    @property
    def source_system(self) -> str:
        return str(self.envelope.get("source_system", ""))


def schema_fingerprint(canonical_form: str) -> bytes:
    """CRC-64-AVRO of a Parsing Canonical Form, as the 8 little-endian bytes single-object encoding uses."""
    return bytes.fromhex(fastavro_fingerprint(canonical_form, FINGERPRINT_ALGORITHM))


def released_file_name(version: SchemaVersion) -> str:
    return f"{version.full_name}.{version.fingerprint_hex}{SCHEMA_FILE_SUFFIX}"


def default_schemas_dir() -> Path:
    """``$YOVISION_SCHEMAS_DIR`` (the ``avro`` dir or its parent), else the repo's ``schemas/avro`` found
    by walking up from this package, else ``/app/schemas/avro`` (containers copy ``schemas/`` there)."""
    configured = os.environ.get(SCHEMAS_DIR_ENV)
    if configured:
        path = Path(configured)
        if (path / "avro").is_dir():
            return path / "avro"
        if path.is_dir():
            return path
        raise SchemaLoadError("schemas_dir_not_found", SCHEMAS_DIR_ENV)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "schemas" / "avro"
        if candidate.is_dir():
            return candidate
    if CONTAINER_SCHEMAS_DIR.is_dir():
        return CONTAINER_SCHEMAS_DIR
    raise SchemaLoadError("schemas_dir_not_found")


def read_schema_documents(schemas_dir: Path) -> dict[str, str]:
    """Current schema files: relative posix path -> JSON text."""
    documents: dict[str, str] = {}
    for path in sorted(schemas_dir.rglob(f"*{SCHEMA_FILE_SUFFIX}")):
        relative = path.relative_to(schemas_dir)
        if relative.parts[0] in (RELEASED_DIR_NAME, SAMPLES_DIR_NAME):
            continue
        documents[relative.as_posix()] = path.read_text(encoding="utf-8")
    return documents


def read_released_documents(schemas_dir: Path) -> dict[str, str]:
    released_dir = schemas_dir / RELEASED_DIR_NAME
    if not released_dir.is_dir():
        return {}
    return {
        path.relative_to(schemas_dir).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(released_dir.glob(f"*{SCHEMA_FILE_SUFFIX}"))
    }


def build_schema_versions(documents: Mapping[str, str]) -> dict[str, SchemaVersion]:
    """Parse schema documents (path -> JSON text, one named type each), resolving named types across
    documents; returns standalone versions by full name."""
    definitions: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    for source, text in documents.items():
        document = _load_json_object(source, text)
        full_name, _ = _full_name(document, "")
        if full_name in definitions:
            raise SchemaLoadError("schema_invalid", f"{source}: {full_name} is defined twice")
        definitions[full_name] = document
        sources[full_name] = source
    return {
        full_name: _standalone_version(
            _inline_named_types(document, definitions, set(), ""), sources[full_name]
        )
        for full_name, document in definitions.items()
    }


def load_released_versions(documents: Mapping[str, str]) -> list[SchemaVersion]:
    """Parse standalone released copies and check that each file name carries its own fingerprint."""
    versions: list[SchemaVersion] = []
    for source, text in documents.items():
        version = _standalone_version(_load_json_object(source, text), source)
        if Path(source).name != released_file_name(version):
            raise SchemaLoadError("released_fingerprint_mismatch", source)
        versions.append(version)
    return versions


class SchemaRegistry:
    """Current schema versions (by full name and by event type = record name) plus released versions
    (by fingerprint only)."""

    def __init__(
        self,
        current: Mapping[str, SchemaVersion],
        released: Iterable[SchemaVersion] = (),
        *,
        root: Path | None = None,
    ) -> None:
        self._current = dict(current)
        self.root = root
        self._by_name: dict[str, SchemaVersion] = {}
        for version in self._current.values():
            if version.name in self._by_name:
                raise SchemaLoadError("schema_invalid", f"record name {version.name} is not unique")
            self._by_name[version.name] = version
        self._released = tuple(released)
        self._by_fingerprint: dict[bytes, SchemaVersion] = {v.fingerprint: v for v in self._released}
        self._by_fingerprint.update({v.fingerprint: v for v in self._current.values()})

    @classmethod
    def load(cls, schemas_dir: Path | None = None) -> SchemaRegistry:
        directory = schemas_dir if schemas_dir is not None else default_schemas_dir()
        if not directory.is_dir():
            raise SchemaLoadError("schemas_dir_not_found", str(directory))
        current = build_schema_versions(read_schema_documents(directory))
        released = load_released_versions(read_released_documents(directory))
        return cls(current, released, root=directory)

    def current_versions(self) -> Mapping[str, SchemaVersion]:
        return self._current

    def released_versions(self) -> tuple[SchemaVersion, ...]:
        return self._released

    def current(self, full_name: str) -> SchemaVersion | None:
        return self._current.get(full_name)

    def for_event_type(self, event_type: str) -> SchemaVersion:
        version = self._by_name.get(event_type)
        if version is None:
            raise UnknownEventTypeError(event_type)
        return version

    def find_by_fingerprint(self, fingerprint: bytes) -> SchemaVersion | None:
        return self._by_fingerprint.get(fingerprint)


class AvroSerde:
    """Encodes records as single-object Avro and decodes them back, resolving old writers to current
    readers. Stateless apart from the registry; safe to share between tasks."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry

    def encode(self, event_type: str, record: Mapping[str, Any]) -> bytes:
        version = self.registry.for_event_type(event_type)
        invalid_field = first_invalid_field(version.parsed, record)
        if invalid_field is not None:
            raise InvalidEventError(invalid_field)
        envelope = record.get("envelope")
        if isinstance(envelope, Mapping) and envelope.get("event_type") != event_type:
            raise InvalidEventError("envelope.event_type")
        try:
            validate(record, version.parsed, raise_errors=True)
        except ValidationError as error:  # backstop; the walk above should have named the field already
            fields = [str(e.field) for e in error.errors]
            raise InvalidEventError(fields[0] if fields else "") from None
        buffer = io.BytesIO()
        buffer.write(SINGLE_OBJECT_MAGIC)
        buffer.write(version.fingerprint)
        schemaless_writer(buffer, version.parsed, dict(record))
        return buffer.getvalue()

    def decode(self, data: bytes, reader_event_type: str | None = None) -> DecodedEvent:
        if (
            len(data) < SINGLE_OBJECT_HEADER_SIZE_BYTES
            or data[: len(SINGLE_OBJECT_MAGIC)] != SINGLE_OBJECT_MAGIC
        ):
            raise NotSingleObjectError()
        fingerprint = bytes(data[len(SINGLE_OBJECT_MAGIC) : SINGLE_OBJECT_HEADER_SIZE_BYTES])
        writer = self.registry.find_by_fingerprint(fingerprint)
        if writer is None:
            raise UnknownSchemaError(fingerprint.hex())
        if reader_event_type is not None:
            reader = self.registry.for_event_type(reader_event_type)
        else:
            current = self.registry.current(writer.full_name)
            if current is None:
                raise UnknownEventTypeError(writer.name)
            reader = current
        body = io.BytesIO(data[SINGLE_OBJECT_HEADER_SIZE_BYTES:])
        value = _read_body(body, writer, reader)
        if body.tell() != len(data) - SINGLE_OBJECT_HEADER_SIZE_BYTES:
            raise MalformedEventError()
        return DecodedEvent(
            event_type=reader.name,
            full_name=reader.full_name,
            writer_fingerprint=writer.fingerprint_hex,
            record=value,
        )


def _read_body(body: io.BytesIO, writer: SchemaVersion, reader: SchemaVersion) -> dict[str, Any]:
    reader_schema = None if reader is writer else reader.parsed
    try:
        value = schemaless_reader(body, writer.parsed, reader_schema)
    except SchemaResolutionError:
        raise SchemaMismatchError(
            f"{writer.full_name}@{writer.fingerprint_hex} -> {reader.full_name}"
        ) from None
    except (EOFError, ValueError, IndexError, OverflowError, MemoryError, struct.error):
        # Untrusted bytes: truncated bodies, bad varints, invalid UTF-8 or uuid text, huge lengths.
        raise MalformedEventError() from None
    if not isinstance(value, dict):
        raise MalformedEventError()
    return value


def _load_json_object(source: str, text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        raise SchemaLoadError("schema_invalid", f"{source}: not JSON") from None
    if not isinstance(document, dict) or document.get("type") not in NAMED_TYPES or "name" not in document:
        raise SchemaLoadError("schema_invalid", f"{source}: must hold one named type")
    return document


def _full_name(named: Mapping[str, Any], enclosing_namespace: str) -> tuple[str, str]:
    """(full name, namespace) of a named type definition, per the Avro naming rules."""
    name = str(named["name"])
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    namespace = named.get("namespace")
    namespace = enclosing_namespace if namespace is None else str(namespace)
    return (f"{namespace}.{name}" if namespace else name), namespace


def _inline_named_types(
    node: Any, definitions: Mapping[str, dict[str, Any]], defined: set[str], namespace: str
) -> Any:
    """Copy ``node`` with the first reference to each type of another document replaced by its
    definition (later references stay names, as the canonical form requires)."""
    if isinstance(node, list):
        return [_inline_named_types(branch, definitions, defined, namespace) for branch in node]
    if isinstance(node, str):
        if node in PRIMITIVE_TYPES:
            return node
        full_name = node if "." in node or not namespace else f"{namespace}.{node}"
        if full_name in defined:
            return full_name
        definition = definitions.get(full_name)
        if definition is None:
            raise SchemaLoadError("unknown_named_type", full_name)
        _, own_namespace = _full_name(definition, "")
        pinned = {**definition, "name": full_name.rsplit(".", 1)[-1], "namespace": own_namespace}
        return _inline_named_types(pinned, definitions, defined, own_namespace)
    if not isinstance(node, dict):
        raise SchemaLoadError("schema_invalid", "unexpected JSON value in a schema")
    type_ = node.get("type")
    if type_ in NAMED_TYPES:
        full_name, own_namespace = _full_name(node, namespace)
        defined.add(full_name)
        if type_ in ("record", "error"):
            fields = [
                {**field, "type": _inline_named_types(field["type"], definitions, defined, own_namespace)}
                for field in node.get("fields", [])
            ]
            return {**node, "fields": fields}
        return dict(node)
    if type_ == "array":
        return {**node, "items": _inline_named_types(node["items"], definitions, defined, namespace)}
    if type_ == "map":
        return {**node, "values": _inline_named_types(node["values"], definitions, defined, namespace)}
    if isinstance(type_, str) and type_ in PRIMITIVE_TYPES:
        return dict(node)
    return _inline_named_types(type_, definitions, defined, namespace)


def _standalone_version(schema: dict[str, Any], source: str) -> SchemaVersion:
    try:
        parsed = parse_schema(schema, {})
        canonical_form = to_parsing_canonical_form(schema)
    except Exception as error:  # fastavro raises several unrelated types for bad schemas
        raise SchemaLoadError("schema_invalid", f"{source}: {type(error).__name__}") from None
    if not isinstance(parsed, dict):
        raise SchemaLoadError("schema_invalid", f"{source}: must hold one named type")
    full_name, _ = _full_name(schema, "")
    return SchemaVersion(
        full_name=full_name,
        fingerprint=schema_fingerprint(canonical_form),
        canonical_form=canonical_form,
        schema=schema,
        parsed=parsed,
        source=source,
    )
