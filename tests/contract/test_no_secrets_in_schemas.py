"""A guard: no event schema may have a field whose name suggests a secret or raw request data."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract.conftest import SCHEMAS_DIR
from yovision_platform.messaging import SchemaRegistry, SchemaVersion, build_schema_versions

# Whole words of a field name (snake_case or camelCase split) that suggest a secret or raw request data.
FORBIDDEN_WORDS = frozenset(
    {
        "uri",
        "url",
        "password",
        "passwd",
        "secret",
        "token",
        "header",
        "headers",
        "body",
        "dsn",
        "credential",
        "credentials",
        "authorization",
        "cookie",
        "cookies",
        "signature",
        "apikey",
    }
)
FORBIDDEN_PHRASES = ("source_uri", "api_key", "private_key")


def field_paths(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, list):
        for branch in node:
            yield from field_paths(branch, prefix)
    elif isinstance(node, dict):
        for field in node.get("fields", ()):
            path = f"{prefix}{field['name']}"
            yield path
            yield from field_paths(field["type"], f"{path}.")
        for key in ("items", "values", "type"):
            if isinstance(node.get(key), dict | list):
                yield from field_paths(node[key], prefix)


def looks_secret(field_name: str) -> bool:
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", field_name).lower()
    return bool(FORBIDDEN_WORDS.intersection(snake.split("_"))) or any(p in snake for p in FORBIDDEN_PHRASES)


def forbidden_fields(version: SchemaVersion) -> list[str]:
    return [path for path in field_paths(version.parsed) if looks_secret(path.rsplit(".", 1)[-1])]


def test_no_current_or_released_schema_has_a_secret_looking_field(registry: SchemaRegistry) -> None:
    offenders = {
        f"{v.source}: {path}"
        for v in [*registry.current_versions().values(), *registry.released_versions()]
        for path in forbidden_fields(v)
    }
    assert not offenders, sorted(offenders)


@pytest.mark.parametrize(
    "name",
    ["source_uri", "sourceUri", "rtsp_url", "auth_headers", "request_body", "pg_dsn", "apiToken", "api_key"],
)
def test_the_guard_catches_secret_looking_names(name: str) -> None:
    document = {
        "type": "record",
        "name": "Leaky",
        "namespace": "t",
        "fields": [{"name": name, "type": "string"}],
    }
    versions = build_schema_versions({"t/Leaky.avsc": json.dumps(document)})
    assert forbidden_fields(versions["t.Leaky"]) == [name]


def test_the_guard_looks_into_nested_records() -> None:
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "password", "type": "string"}]}
    document = {
        "type": "record",
        "name": "Outer",
        "namespace": "t",
        "fields": [{"name": "inner", "type": inner}],
    }
    versions = build_schema_versions({"t/Outer.avsc": json.dumps(document)})
    assert forbidden_fields(versions["t.Outer"]) == ["inner.password"]


def test_samples_hold_no_secret_looking_values() -> None:
    for path in (SCHEMAS_DIR / "samples").glob("*.json"):
        text = path.read_text(encoding="utf-8").lower()
        for marker in ("rtsp://", "password", "bearer ", "postgresql://", "begin private key"):
            assert marker not in text, f"{path.name} contains {marker!r}"


@pytest.mark.parametrize("name", ["security_level", "duration_ms", "nobody_home", "path_name", "tokenizer"])
def test_the_guard_ignores_innocent_names(name: str) -> None:
    assert not looks_secret(name)
