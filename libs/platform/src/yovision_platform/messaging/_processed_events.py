"""Pruning the idempotent consumer's `processed_events`, past a retention longer than the topics'.

A `processed_events` row is what makes a redelivered event a duplicate. Kafka only redelivers what it still
holds, so a row may go once it is older than the topic's own retention: the pruner deletes the rows of one
consumer group older than its retention, in bounded batches, and only after checking, against the broker's
current topic configuration, that this retention is longer than the `retention.ms` of every delete-policy
topic the group reads. A topic without a time limit (`retention.ms = -1`), or a retention that is not
longer, refuses the round with a stable code: nothing is deleted, and the warning says why.

Compacted topics keep the latest event per key without a time limit; their events are pruned by the same
retention. A compacted event comes back only when it is published again (the outbox relay's at-least-once
republish after a crash, within its lease) or when an operator resets a group: the rows kept for the
retention cover the first, and the consumer's DB positions (not Kafka's) decide where a group resumes
(docs/decisions.md, processed_events retention).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from yovision_platform.backoff import wait_for_stop
from yovision_platform.messaging._kafka import admin_client, start_client
from yovision_platform.messaging._kafka_security import KafkaTarget
from yovision_platform.settings import PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT
from yovision_platform.storage._db import Identifier

__all__ = [
    "PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT",
    "ProcessedEventsPruner",
    "PruneRound",
    "TopicRetention",
    "describe_topic_retention",
    "retention_refusal",
]

log = logging.getLogger("yovision_platform.processed_events")

PROCESSED_EVENTS_PRUNE_BATCH_ROWS = 5000
PROCESSED_EVENTS_PRUNE_MAX_BATCHES = 200  # per round; the next round continues
PROCESSED_EVENTS_PRUNE_INTERVAL_SECONDS = 3600.0
TOPIC_CONFIG_TIMEOUT_SECONDS = 10.0
UNLIMITED = -1


@dataclass(frozen=True)
class TopicRetention:
    topic: str
    cleanup_policy: frozenset[str]
    retention_ms: int  # -1: no time limit


@dataclass(frozen=True)
class PruneRound:
    deleted: int
    refused: str | None = None  # a stable code when nothing was deleted on purpose


def retention_refusal(retention_seconds: float, topics: Sequence[TopicRetention]) -> str | None:
    """None when `retention_seconds` outlives every delete-policy topic, else the stable reason code."""
    for topic in topics:
        if "delete" not in topic.cleanup_policy:
            continue
        if topic.retention_ms == UNLIMITED:
            return "topic_retention_unlimited"
        if retention_seconds * 1000 <= topic.retention_ms:
            return "retention_not_longer_than_topic"
    return None


async def describe_topic_retention(
    kafka: KafkaTarget,
    topics: Sequence[str],
    *,
    client_id: str,
    timeout_seconds: float = TOPIC_CONFIG_TIMEOUT_SECONDS,
) -> list[TopicRetention]:
    """The broker's current `cleanup.policy` and `retention.ms` of each topic. Raises KafkaError when a topic
    is unknown, TimeoutError when the broker does not answer in time."""
    admin = admin_client(kafka, client_id=client_id)
    try:
        async with asyncio.timeout(timeout_seconds):
            await start_client(admin, kafka, close=admin.close)
            responses = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic) for topic in topics]
            )
    finally:
        await admin.close()
    found: list[TopicRetention] = []
    for response in responses:
        for resource in response.to_object()["resources"]:
            if resource["error_code"] != 0:
                raise KafkaError("topic configuration unavailable")
            entries = {e["config_names"]: e["config_value"] for e in resource["config_entries"]}
            found.append(
                TopicRetention(
                    resource["resource_name"],
                    frozenset(entries.get("cleanup.policy", "delete").split(",")),
                    int(entries.get("retention.ms", UNLIMITED)),
                )
            )
    return found


Describe = Callable[[], Awaitable[Sequence[TopicRetention]]]


class ProcessedEventsPruner:
    """Deletes `consumer_group`'s processed_events rows older than `retention_seconds` (see the module)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        schema: Identifier,
        *,
        consumer_group: str,
        kafka: KafkaTarget,
        topics: Sequence[str],
        client_id: str,
        retention_seconds: float,
        batch_rows: int = PROCESSED_EVENTS_PRUNE_BATCH_ROWS,
        max_batches: int = PROCESSED_EVENTS_PRUNE_MAX_BATCHES,
        interval_seconds: float = PROCESSED_EVENTS_PRUNE_INTERVAL_SECONDS,
        describe: Describe | None = None,
    ) -> None:
        if retention_seconds <= 0 or batch_rows < 1 or max_batches < 1:
            raise ValueError("retention, batch and batch count must be positive")
        self._pool = pool
        self._group = consumer_group
        self._retention = float(retention_seconds)
        self._batch = batch_rows
        self._max_batches = max_batches
        self._interval = interval_seconds
        self._describe = describe or (lambda: describe_topic_retention(kafka, topics, client_id=client_id))
        table = f"{schema.quoted}.processed_events"
        self._delete = f"""
            DELETE FROM {table} WHERE (source_system, event_id) IN (
                SELECT source_system, event_id FROM {table}
                 WHERE consumer_group = $1 AND processed_at < now() - make_interval(secs => $2)
                 ORDER BY processed_at LIMIT $3)
        """

    async def prune_once(self) -> PruneRound:
        """Check the topics' retention, then delete old rows batch by batch (each its own statement)."""
        try:
            refused = retention_refusal(self._retention, await self._describe())
        except (KafkaError, TimeoutError, OSError):
            refused = "topic_retention_unknown"
        if refused is not None:
            log.warning("processed_events not pruned", extra={"error_code": refused})
            return PruneRound(0, refused)
        deleted = 0
        for _ in range(self._max_batches):
            async with self._pool.acquire() as conn:
                status: str = await conn.execute(self._delete, self._group, self._retention, self._batch)
            count = int(status.split()[-1])
            deleted += count
            if count < self._batch:
                break
        if deleted:
            log.info("processed_events pruned", extra={"rows": deleted})
        return PruneRound(deleted)

    async def run(self, stop: asyncio.Event) -> None:
        """A round now and then every interval, until `stop`. Database trouble waits for the next round."""
        while not stop.is_set():
            try:
                await self.prune_once()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("processed_events pruning failed", extra={"error_code": type(exc).__name__})
            await wait_for_stop(stop, self._interval)
