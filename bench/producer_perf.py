"""Kafka's own producer benchmark on the same broker, as the physical limit: `kafka-producer-perf-test`
(`org.apache.kafka.tools.ProducerPerformance`) from the broker's jars in .local/kafka/libs, with the
relay's guarantees: acks=all and idempotence; a second run adds a transaction per TRANSACTION_MS."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from bench.infra import REPO_ROOT

__all__ = ["PerfRun", "producer_performance"]

KAFKA_LIBS = REPO_ROOT / ".local" / "kafka" / "libs"
MAIN_CLASS = "org.apache.kafka.tools.ProducerPerformance"
JAVA_OPTIONS = ("-Xms256m", "-Xmx512m", "-XX:+UseSerialGC")
SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")
TRANSACTION_MS = 20
RUN_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class PerfRun:
    label: str
    records: int
    events_per_second: float
    mb_per_second: float

    def as_dict(self) -> dict[str, object]:
        return {
            "records": self.records,
            "events_per_s": round(self.events_per_second),
            "mb_per_s": self.mb_per_second,
        }


async def producer_performance(
    bootstrap: str,
    topic: str,
    *,
    records: int,
    record_size: int,
    transactional: bool,
    batch_bytes: int | None = None,
) -> PerfRun:
    """One run; `batch_bytes` sets the producer's batch.size (the Java client's default is 16 KiB)."""
    properties = [f"bootstrap.servers={bootstrap}", "acks=all", "enable.idempotence=true", "linger.ms=5"]
    if batch_bytes is not None:
        properties.append(f"batch.size={batch_bytes}")
    extra = ["--transactional-id", f"bench-perf-{topic}", "--transaction-duration-ms", str(TRANSACTION_MS)]
    process = await asyncio.create_subprocess_exec(
        "java",
        *JAVA_OPTIONS,
        "-cp",
        f"{KAFKA_LIBS}/*",
        MAIN_CLASS,
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(record_size),
        "--throughput",
        "-1",
        *(extra if transactional else []),
        "--producer-props",
        *properties,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), RUN_TIMEOUT_SECONDS)
    found = SUMMARY.findall(output.decode(errors="replace"))
    if process.returncode != 0 or not found:
        raise RuntimeError(f"ProducerPerformance failed: {output.decode(errors='replace')[-500:]}")
    sent, rate, mb = found[-1]
    label = f"ProducerPerformance ({'transaction per 20 ms' if transactional else 'idempotent'}"
    label += f", batch.size {batch_bytes // 1024} KiB)" if batch_bytes is not None else ")"
    return PerfRun(label, int(sent), float(rate), float(mb))
