"""Latency percentiles, rates and a wall/CPU stopwatch."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Latency", "Stopwatch", "per_second", "percentile"]

MS_PER_SECOND = 1000.0


def percentile(sorted_samples: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted samples (0.0 when there are none)."""
    if not sorted_samples:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_samples)))
    return sorted_samples[rank - 1]


def per_second(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


@dataclass(frozen=True)
class Latency:
    """Percentiles of a set of durations, in milliseconds."""

    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    @classmethod
    def of_seconds(cls, samples: Sequence[float]) -> Latency:
        ordered = sorted(samples)
        mean = sum(ordered) / len(ordered) if ordered else 0.0
        return cls(
            count=len(ordered),
            p50_ms=percentile(ordered, 0.50) * MS_PER_SECOND,
            p95_ms=percentile(ordered, 0.95) * MS_PER_SECOND,
            p99_ms=percentile(ordered, 0.99) * MS_PER_SECOND,
            max_ms=(ordered[-1] if ordered else 0.0) * MS_PER_SECOND,
            mean_ms=mean * MS_PER_SECOND,
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "count": self.count,
            "p50_ms": round(self.p50_ms, 3),
            "p95_ms": round(self.p95_ms, 3),
            "p99_ms": round(self.p99_ms, 3),
            "max_ms": round(self.max_ms, 3),
            "mean_ms": round(self.mean_ms, 3),
        }


@dataclass
class Stopwatch:
    """Wall-clock and this process's CPU time between `start` and `stop`.

    CPU/wall near 1.0 means the Python process is the bottleneck (one core saturated by the event loop).
    """

    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    _wall_start: float = field(default=0.0, repr=False)
    _cpu_start: float = field(default=0.0, repr=False)

    def start(self) -> Stopwatch:
        self._wall_start = time.perf_counter()
        self._cpu_start = time.process_time()
        return self

    def stop(self) -> Stopwatch:
        self.wall_seconds = time.perf_counter() - self._wall_start
        self.cpu_seconds = time.process_time() - self._cpu_start
        return self

    @property
    def cpu_share(self) -> float:
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0
