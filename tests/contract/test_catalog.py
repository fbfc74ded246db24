"""The catalogue agrees with the schemas, the samples and the topics the stack creates."""

from __future__ import annotations

import tomllib

from tests.contract.conftest import TOPICS_TOML
from yovision_platform.messaging import EventCatalog, SchemaRegistry

ENVELOPE_FULL_NAME = "com.yovision.events.platform.EventEnvelope"


def _stack_topics() -> dict[str, dict[str, object]]:
    assert TOPICS_TOML.is_file(), f"{TOPICS_TOML} is missing: the stack would create no topics"
    document = tomllib.loads(TOPICS_TOML.read_text(encoding="utf-8"))
    return {str(topic["name"]): topic for topic in document["topic"]}


def test_the_catalogue_matches_the_schemas(catalog: EventCatalog, registry: SchemaRegistry) -> None:
    catalog.verify_against(registry)


def test_every_event_schema_is_catalogued(catalog: EventCatalog, registry: SchemaRegistry) -> None:
    event_names = {v.name for v in registry.current_versions().values() if v.full_name != ENVELOPE_FULL_NAME}
    assert event_names == set(catalog.events)


def test_each_event_is_owned_by_the_system_of_its_namespace(
    catalog: EventCatalog, registry: SchemaRegistry
) -> None:
    for entry in catalog.events.values():
        assert registry.for_event_type(entry.event_type).full_name.split(".")[-2] == entry.owner


def test_all_events_of_a_topic_share_the_topics_key_field(catalog: EventCatalog) -> None:
    for entry in catalog.events.values():
        assert entry.key_field == catalog.topics[entry.topic].key, entry.event_type


def test_topic_names_follow_owner_aggregate_major(catalog: EventCatalog) -> None:
    for name, topic in catalog.topics.items():
        owner, aggregate, major = name.split(".")
        assert owner == topic.owner
        assert aggregate
        assert major.startswith("v")
        assert major[1:].isdigit()


def test_every_catalogued_topic_is_created_by_the_stack(catalog: EventCatalog) -> None:
    missing = sorted(set(catalog.topics) - set(_stack_topics()))
    assert not missing, f"topics in catalog.json but not in infra/topics.toml: {missing}"


def test_catalogued_partition_counts_match_the_stack(catalog: EventCatalog) -> None:
    stack_topics = _stack_topics()
    for name, topic in catalog.topics.items():
        assert stack_topics[name]["partitions"] == topic.partitions, name


def test_the_envelope_file_named_by_the_catalogue_defines_the_envelope(
    catalog: EventCatalog, registry: SchemaRegistry
) -> None:
    envelope = registry.current(ENVELOPE_FULL_NAME)
    assert envelope is not None
    assert envelope.source == catalog.envelope_schema_file
