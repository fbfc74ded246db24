"""Fixtures for the event contract tests: the repo's schemas, catalogue and samples (no infrastructure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yovision_platform.messaging import AvroSerde, EventCatalog, SchemaRegistry

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMAS_DIR = REPO_ROOT / "schemas" / "avro"
SAMPLES_DIR = SCHEMAS_DIR / "samples"
TOPICS_TOML = REPO_ROOT / "infra" / "topics.toml"


def load_sample(event_type: str) -> dict[str, Any]:
    sample: dict[str, Any] = json.loads((SAMPLES_DIR / f"{event_type}.json").read_text(encoding="utf-8"))
    return sample


def catalog_event_types() -> list[str]:
    return sorted(EventCatalog.load(SCHEMAS_DIR).events)


@pytest.fixture(scope="session")
def registry() -> SchemaRegistry:
    return SchemaRegistry.load(SCHEMAS_DIR)


@pytest.fixture(scope="session")
def serde(registry: SchemaRegistry) -> AvroSerde:
    return AvroSerde(registry)


@pytest.fixture(scope="session")
def catalog() -> EventCatalog:
    return EventCatalog.load(SCHEMAS_DIR)
