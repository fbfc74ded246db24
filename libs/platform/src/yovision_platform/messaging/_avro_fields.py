"""Which field of a datum does not fit its Avro schema: a path (``envelope.event_id``), never a value.

fastavro's own validation error text embeds the offending value; this walker reports only where the datum
first departs from the parsed schema, so an `invalid_event` error can name the field safely.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

__all__ = ["NAMED_TYPES", "PRIMITIVE_TYPES", "first_invalid_field"]

PRIMITIVE_TYPES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED_TYPES = frozenset({"record", "error", "enum", "fixed"})
_INT_RANGE = range(-(2**31), 2**31)
_LONG_RANGE = range(-(2**63), 2**63)


def first_invalid_field(parsed: Any, datum: Any) -> str | None:
    """Path of the first field of ``datum`` that does not match the parsed schema (missing without a
    default, unknown, wrong type or out of range), or None. Names only, never values."""
    names: dict[str, Any] = {}
    _collect_named_types(parsed, names)
    return _invalid_path(parsed, datum, "", names)


def _collect_named_types(node: Any, names: dict[str, Any]) -> None:
    if isinstance(node, list):
        for branch in node:
            _collect_named_types(branch, names)
    elif isinstance(node, dict):
        if node.get("type") in NAMED_TYPES:
            names[str(node["name"])] = node
        for field in node.get("fields", []):
            _collect_named_types(field["type"], names)
        for key in ("items", "values"):
            if key in node:
                _collect_named_types(node[key], names)


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def _invalid_path(schema: Any, datum: Any, path: str, names: Mapping[str, Any]) -> str | None:
    if isinstance(schema, list):
        matches = any(_invalid_path(branch, datum, path, names) is None for branch in schema)
        return None if matches else (path or "<record>")
    if isinstance(schema, str):
        if schema in names:
            return _invalid_path(names[schema], datum, path, names)
        return None if _primitive_matches(schema, None, datum) else (path or "<record>")
    type_ = schema["type"]
    if type_ in ("record", "error"):
        return _invalid_record_path(schema, datum, path, names)
    if type_ == "array":
        if not isinstance(datum, list | tuple):
            return path
        for index, item in enumerate(datum):
            invalid = _invalid_path(schema["items"], item, f"{path}[{index}]", names)
            if invalid is not None:
                return invalid
        return None
    if type_ == "map":
        if not isinstance(datum, Mapping) or not all(isinstance(key, str) for key in datum):
            return path
        for key, item in datum.items():
            invalid = _invalid_path(schema["values"], item, f"{path}[{key!r}]", names)
            if invalid is not None:
                return invalid
        return None
    if type_ == "enum":
        return None if datum in schema["symbols"] else path
    if type_ == "fixed":
        return None if isinstance(datum, bytes) and len(datum) == schema["size"] else path
    if isinstance(type_, str) and type_ in PRIMITIVE_TYPES:
        return None if _primitive_matches(type_, schema.get("logicalType"), datum) else path
    return _invalid_path(type_, datum, path, names)


def _invalid_record_path(
    schema: Mapping[str, Any], datum: Any, path: str, names: Mapping[str, Any]
) -> str | None:
    if not isinstance(datum, Mapping):
        return path or "<record>"
    fields = schema["fields"]
    known = {field["name"] for field in fields}
    for key in datum:
        if key not in known:
            return _join(path, str(key))
    for field in fields:
        field_path = _join(path, field["name"])
        if field["name"] not in datum:
            if "default" in field:
                continue
            return field_path
        invalid = _invalid_path(field["type"], datum[field["name"]], field_path, names)
        if invalid is not None:
            return invalid
    return None


def _primitive_matches(type_: str, logical_type: Any, datum: Any) -> bool:
    if type_ == "null":
        return datum is None
    if type_ == "boolean":
        return isinstance(datum, bool)
    if type_ in ("int", "long"):
        if type_ == "long" and logical_type == "timestamp-millis" and isinstance(datum, datetime):
            return datum.tzinfo is not None
        allowed = _INT_RANGE if type_ == "int" else _LONG_RANGE
        return isinstance(datum, int) and not isinstance(datum, bool) and datum in allowed
    if type_ in ("float", "double"):
        return isinstance(datum, int | float) and not isinstance(datum, bool)
    if type_ == "bytes":
        return isinstance(datum, bytes | bytearray)
    if logical_type == "uuid":
        return isinstance(datum, uuid.UUID) or (isinstance(datum, str) and _is_canonical_uuid(datum))
    return isinstance(datum, str)


def _is_canonical_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False
