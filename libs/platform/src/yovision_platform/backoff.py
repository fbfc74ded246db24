"""Pacing for loops that retry or poll: capped exponential backoff and "wait for stop or N seconds".

`backoff_seconds(failures, base_seconds=..., cap_seconds=...)` is ``min(cap, base * 2**failures)`` for any
failure count: the exponent is clamped before the power is taken, so a loop that has failed a million
times waits ``cap`` seconds instead of raising OverflowError (``2.0 ** 1024`` does). Negative counts count
as zero.

`wait_for_stop(stop, seconds)` returns as soon as `stop` is set or after `seconds`, whichever is first, and
says which: ``True`` means stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math

__all__ = ["MAX_BACKOFF_EXPONENT", "backoff_seconds", "wait_for_stop"]

# 2.0**1024 raises OverflowError; 2.0**1000 (~1e301) does not, and times any positive base it exceeds every
# cap (a product too large for a float is inf, which `min` turns into the cap).
MAX_BACKOFF_EXPONENT = 1000


def backoff_seconds(failures: int, *, base_seconds: float, cap_seconds: float) -> float:
    """``min(cap_seconds, base_seconds * 2**failures)``, never raising for a large `failures`."""
    if (
        not (math.isfinite(base_seconds) and math.isfinite(cap_seconds))
        or base_seconds < 0
        or cap_seconds < 0
    ):
        raise ValueError("base_seconds and cap_seconds must be finite and >= 0")
    exponent = min(max(failures, 0), MAX_BACKOFF_EXPONENT)
    return min(cap_seconds, base_seconds * 2.0**exponent)


async def wait_for_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Wait until `stop` is set or `seconds` (clamped at 0) have passed; True when `stop` is set."""
    if not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(seconds, 0.0))
    return stop.is_set()
