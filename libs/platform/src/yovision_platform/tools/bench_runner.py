"""Run a benchmark so that its cleanup always runs, and so that it cannot pass on a short count.

`asyncio.run` already cancels the main task on the first Ctrl-C, so `finally` blocks (dropping schemas,
deleting MediaMTX paths) get to run; `run_cleanly` does the same for SIGTERM, which would otherwise kill the
process in the middle and leave what the benchmark created on the shared stack.

`BenchCounts` is a benchmark's ledger of what must have happened (records delivered, rows present, jobs done):
`expect` records each count against its expectation (fewer is a loss, more a duplicate: both are wrong),
`exit_if_short` prints every wrong one and exits 1. A figure measured over a wrong count means nothing, so
the benchmark marks it (`mark`) instead of printing it as a result.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["BenchCounts", "run_cleanly"]

T = TypeVar("T")


def run_cleanly(main: Coroutine[Any, Any, T]) -> T:
    async def guarded() -> T:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await main

    return asyncio.run(guarded())


@dataclass
class BenchCounts:
    """What a benchmark saw against what it must have seen (see the module docstring)."""

    short: list[str] = field(default_factory=list)

    def expect(self, what: str, got: int, expected: int) -> bool:
        """True when `got` is `expected`; otherwise the shortfall is recorded."""
        if got != expected:
            self.short.append(f"{what}: {got:,} of {expected:,}")
            return False
        return True

    @staticmethod
    def mark(ok: bool, figure: str) -> str:
        """The figure, or a failure in its place when its count was short."""
        return figure if ok else "WRONG COUNT"

    def exit_if_short(self, name: str) -> None:
        if self.short:
            for line in self.short:
                print(f"{name}: WRONG COUNT: {line}", file=sys.stderr, flush=True)
            sys.exit(1)
