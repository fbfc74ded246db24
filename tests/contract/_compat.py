"""Schema compatibility by example: generate data with the writer schema, read it with the reader schema.

Several variants are generated so that every union branch and enum symbol is written at least once and
arrays/maps appear empty and non-empty.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

from fastavro import schemaless_reader, schemaless_writer

from yovision_platform.messaging import SchemaVersion

SAMPLE_TIMESTAMP_MS = 1_764_460_800_000


def _width(node: Any) -> int:
    if isinstance(node, list):
        return max([len(node), *(_width(branch) for branch in node)])
    if isinstance(node, dict):
        widths = [len(node.get("symbols", ()))]
        widths += [_width(field["type"]) for field in node.get("fields", ())]
        widths += [_width(node[key]) for key in ("items", "values") if key in node]
        if isinstance(node.get("type"), dict | list):
            widths.append(_width(node["type"]))
        return max(widths)
    return 1


def sample_data(parsed: dict[str, Any]) -> list[Any]:
    variants = max(3, _width(parsed))
    return [_generate(parsed, variant, {}) for variant in range(variants)]


def _generate(node: Any, variant: int, names: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return _generate(node[variant % len(node)], variant, names)
    if isinstance(node, str):
        if node in names:
            return _generate(names[node], variant, names)
        return _primitive(node, None, variant)
    type_ = node["type"]
    if type_ == "record":
        names[node["name"]] = node
        return {field["name"]: _generate(field["type"], variant, names) for field in node["fields"]}
    if type_ == "enum":
        names[node["name"]] = node
        return node["symbols"][variant % len(node["symbols"])]
    if type_ == "fixed":
        names[node["name"]] = node
        return bytes(node["size"])
    if type_ == "array":
        return [_generate(node["items"], variant + i, names) for i in range(variant % 3)]
    if type_ == "map":
        return {f"k{i}": _generate(node["values"], variant + i, names) for i in range(variant % 3)}
    if isinstance(type_, str) and type_ in _PRIMITIVE_SAMPLES:
        return _primitive(type_, node.get("logicalType"), variant)
    return _generate(type_, variant, names)


_PRIMITIVE_SAMPLES: dict[str, Any] = {
    "null": None,
    "boolean": True,
    "int": 7,
    "long": 7_000_000_000,
    "float": 1.5,
    "double": 2.5,
    "bytes": b"\x00\x01",
    "string": "sample",
}


def _primitive(type_: str, logical_type: Any, variant: int) -> Any:
    if logical_type == "uuid":
        return str(uuid.UUID(int=variant + 1))
    if logical_type == "timestamp-millis":
        return SAMPLE_TIMESTAMP_MS + variant
    if type_ == "boolean":
        return variant % 2 == 0
    return _PRIMITIVE_SAMPLES[type_]


def check_can_read(writer: SchemaVersion, reader: SchemaVersion) -> None:
    """Raise AssertionError unless every generated datum of ``writer`` reads with ``reader``."""
    for datum in sample_data(writer.parsed):
        buffer = io.BytesIO()
        schemaless_writer(buffer, writer.parsed, datum)
        buffer.seek(0)
        try:
            schemaless_reader(buffer, writer.parsed, reader.parsed)
        except Exception as error:
            raise AssertionError(
                f"{reader.source} ({reader.fingerprint_hex}) cannot read data written with "
                f"{writer.source} ({writer.fingerprint_hex}): {type(error).__name__}: {error}"
            ) from error
