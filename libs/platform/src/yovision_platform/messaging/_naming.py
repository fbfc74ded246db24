"""The Kafka names one deployment uses: topics, consumer groups and transactional ids.

The event catalogue (``schemas/avro/catalog.json``) owns every topic's *logical* name, such as
``sense.device.v1``; outbox rows, settings and code speak logical names. A deployment may put one prefix in
front of every Kafka name it uses (``<P>_KAFKA_PREFIX``, for example ``staging.``), so that several
environments -- or the end-to-end suite's runs -- share one Kafka cluster without seeing each other's
messages or stealing each other's partitions. The prefix is applied only where a name meets Kafka: when the
relay publishes, when a consumer subscribes or joins its group, when an admin client asks for offsets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KAFKA_PREFIX_PATTERN", "KafkaNames"]

# Kafka allows [a-zA-Z0-9._-] in topic names; we keep names lowercase and leave room for the logical part.
KAFKA_PREFIX_PATTERN = re.compile(r"(?:[a-z0-9][a-z0-9._-]{0,62})?")


@dataclass(frozen=True)
class KafkaNames:
    """Physical Kafka names under one prefix (empty: the logical names themselves)."""

    prefix: str = ""

    def __post_init__(self) -> None:
        if KAFKA_PREFIX_PATTERN.fullmatch(self.prefix) is None:
            raise ValueError("kafka prefix must be empty or match ^[a-z0-9][a-z0-9._-]{0,62}$")

    def topic(self, logical: str) -> str:
        return self.prefix + logical

    def topics(self, logical: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        return tuple(self.topic(name) for name in logical)

    def group(self, logical: str) -> str:
        return self.prefix + logical

    def logical_topic(self, physical: str) -> str:
        """The catalogue name of a topic this deployment uses; ValueError for a topic outside it."""
        if not physical.startswith(self.prefix):
            raise ValueError("topic outside this deployment's prefix")
        return physical[len(self.prefix) :]
