"""The benchmark's messages: Avro SmokeTestEvents built through the producer boundary `build_event`."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from yovision_platform.messaging import AvroSerde, OutboxMessage, SchemaRegistry, build_event, catalog_for

__all__ = ["BENCH_KEY_COUNT", "KafkaMessage", "MessageSet", "build_messages"]

BENCH_EVENT_TYPE = "SmokeTestEvent"
BENCH_SOURCE_SYSTEM = "platform"
BENCH_KEY_COUNT = 1000
# A note of this length makes the encoded value ~230 bytes (envelope + run id + note).
BENCH_NOTE_CHARS = 120
BENCH_KEY_SEED = 20_260_101


@dataclass(frozen=True)
class KafkaMessage:
    """What a raw producer sends: the same topic, key, value and headers the relay would send."""

    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, str | bytes | None]]


@dataclass(frozen=True)
class MessageSet:
    outbox: Sequence[OutboxMessage]
    build_seconds: float

    @property
    def mean_value_bytes(self) -> float:
        return sum(len(m.value) for m in self.outbox) / len(self.outbox) if self.outbox else 0.0

    @property
    def distinct_keys(self) -> int:
        return len({m.key for m in self.outbox})

    def for_kafka(self, topic: str | None = None) -> list[KafkaMessage]:
        return [
            KafkaMessage(topic or m.topic, m.key, m.value, [(k, v.encode()) for k, v in m.headers])
            for m in self.outbox
        ]


def build_messages(count: int, topic: str, *, key_count: int = BENCH_KEY_COUNT, seed: int = 0) -> MessageSet:
    """`count` encoded events over `key_count` keys drawn at random (seeded, so runs are comparable).

    Random keys, not round-robin: a relay batch then holds some keys more than once, as in production, and
    pays for its per-key publish waves.
    """
    serde = AvroSerde(SchemaRegistry.load())
    catalog = catalog_for(serde)
    picker = random.Random(BENCH_KEY_SEED + seed)
    note = "n" * BENCH_NOTE_CHARS
    started = time.perf_counter()
    messages = []
    for _ in range(count):
        run_id = f"bench-run-{picker.randrange(key_count):04d}"
        event = build_event(
            serde,
            BENCH_EVENT_TYPE,
            run_id,
            {"run_id": run_id, "produced_by": "bench", "note": note},
            BENCH_SOURCE_SYSTEM,
            catalog=catalog,
        )
        messages.append(OutboxMessage.from_event(event, topic=topic))
    return MessageSet(messages, time.perf_counter() - started)
