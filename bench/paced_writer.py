"""The paced writers of the latency benchmark, as their own process (so the measuring consumer does not
compete with them for one core).

    BENCH_RUNTIME_DSN=... python -m bench.paced_writer SCHEMA RATE MESSAGES_FILE RESULT_FILE

MESSAGES_FILE: JSON lines of outbox messages (hex bytes); RESULT_FILE gets {event_id: monotonic commit time}
(CLOCK_MONOTONIC is one clock for every process of the machine).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path

import asyncpg

from bench.relay_worker import DSN_ENV
from yovision_platform.messaging import Outbox, OutboxMessage
from yovision_platform.storage import Identifier, TransactionalOutbox, create_pool

PACED_TRANSACTION_ROWS = 10
PACED_WRITERS = 4


def load(path: Path) -> list[OutboxMessage]:
    messages = []
    for line in path.read_text().splitlines():
        m = json.loads(line)
        messages.append(
            OutboxMessage(
                uuid.UUID(m["event_id"]),
                m["event_type"],
                m["topic"],
                bytes.fromhex(m["key"]),
                bytes.fromhex(m["value"]),
                [(str(name), str(value)) for name, value in m["headers"]],
            )
        )
    return messages


def dump(messages: list[OutboxMessage], path: Path) -> None:
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "event_id": str(m.event_id),
                    "event_type": m.event_type,
                    "topic": m.topic,
                    "key": m.key.hex(),
                    "value": m.value.hex(),
                    "headers": [list(h) for h in m.headers],
                }
            )
            for m in messages
        )
    )


async def write(
    pool: asyncpg.Pool,
    outbox: Outbox,
    messages: list[OutboxMessage],
    rate: float,
    committed: dict[str, float],
) -> None:
    """As `PostgresUnitOfWork` writes a use case's events (one enqueue_many per transaction, the publishers
    woken after the commit), with the moment the COMMIT returned noted in between."""
    started = time.perf_counter()
    async with pool.acquire() as conn:
        for offset in range(0, len(messages), PACED_TRANSACTION_ROWS):
            delay = started + offset / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            # Keys sorted, as a use case writing several events does (enqueue_many locks them in that order).
            chunk = sorted(messages[offset : offset + PACED_TRANSACTION_ROWS], key=lambda m: m.key)
            transactional = TransactionalOutbox(conn, outbox, wake_after_commit=True)
            async with conn.transaction():
                await transactional.enqueue_many(chunk)
            now = time.monotonic()
            await transactional.wake()
            for message in chunk:
                committed[str(message.event_id)] = now


async def main(schema: str, rate: float, messages_file: Path, result_file: Path) -> None:
    messages = load(messages_file)
    pool = await create_pool(
        os.environ[DSN_ENV], application_name="bench-paced-writer", max_size=PACED_WRITERS
    )
    outbox = Outbox(Identifier(schema))
    committed: dict[str, float] = {}
    share = len(messages) // PACED_WRITERS + 1
    started = time.monotonic()
    try:
        await asyncio.gather(
            *(
                write(pool, outbox, messages[w * share : (w + 1) * share], rate / PACED_WRITERS, committed)
                for w in range(PACED_WRITERS)
            )
        )
    finally:
        await pool.close()
    save(result_file, {"committed": committed, "seconds": time.monotonic() - started})


def save(path: Path, result: dict[str, object]) -> None:
    path.write_text(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])))
