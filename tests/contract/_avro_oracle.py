"""Independent implementations, written from the Avro specification, used to check fastavro and our
registry: the CRC-64-AVRO (Rabin) fingerprint and the Parsing Canonical Form."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CRC64_AVRO_EMPTY = 0xC15D213AA4D7A795
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "enum", "fixed"})


def _crc64_table() -> list[int]:
    table = []
    for index in range(256):
        fingerprint = index
        for _ in range(8):
            fingerprint = (fingerprint >> 1) ^ (CRC64_AVRO_EMPTY & -(fingerprint & 1))
        table.append(fingerprint)
    return table


_CRC64_TABLE = _crc64_table()


def crc64_avro(data: bytes) -> int:
    """The spec's 64-bit Rabin fingerprint, as an unsigned integer."""
    fingerprint = CRC64_AVRO_EMPTY
    for byte in data:
        fingerprint = (fingerprint >> 8) ^ _CRC64_TABLE[(fingerprint ^ byte) & 0xFF]
    return fingerprint


def single_object_fingerprint(canonical_form: str) -> bytes:
    """The 8 header bytes of single-object encoding: the fingerprint, little-endian."""
    return crc64_avro(canonical_form.encode("utf-8")).to_bytes(8, "little")


def parsing_canonical_form(schema: Any, definitions: Mapping[str, Any] | None = None) -> str:
    """Canonical form of ``schema``; names not defined inside it are looked up in ``definitions``
    (full name -> top-level schema document) and written out at their first use."""
    return _canonical(schema, "", definitions or {}, set())


def _text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _canonical(node: Any, namespace: str, definitions: Mapping[str, Any], emitted: set[str]) -> str:
    if isinstance(node, list):
        return "[" + ",".join(_canonical(branch, namespace, definitions, emitted) for branch in node) + "]"
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return _text(node)
        full_name = node if "." in node or not namespace else f"{namespace}.{node}"
        if full_name in emitted:
            return _text(full_name)
        return _canonical(definitions[full_name], "", definitions, emitted)
    type_ = node["type"]
    if type_ in _NAMED:
        name = node["name"]
        if "." in name:
            full_name, own_namespace = name, name.rsplit(".", 1)[0]
        else:
            own_namespace = node.get("namespace", namespace)
            full_name = f"{own_namespace}.{name}" if own_namespace else name
        emitted.add(full_name)
        parts = [f'"name":{_text(full_name)}', f'"type":{_text(type_)}']
        if type_ == "record":
            fields = [
                f'{{"name":{_text(field["name"])},"type":'
                f"{_canonical(field['type'], own_namespace, definitions, emitted)}}}"
                for field in node["fields"]
            ]
            parts.append('"fields":[' + ",".join(fields) + "]")
        elif type_ == "enum":
            parts.append('"symbols":[' + ",".join(_text(s) for s in node["symbols"]) + "]")
        else:
            parts.append(f'"size":{int(node["size"])}')
        return "{" + ",".join(parts) + "}"
    if type_ == "array":
        return '{"type":"array","items":' + _canonical(node["items"], namespace, definitions, emitted) + "}"
    if type_ == "map":
        return '{"type":"map","values":' + _canonical(node["values"], namespace, definitions, emitted) + "}"
    return _canonical(type_, namespace, definitions, emitted)
