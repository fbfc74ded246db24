"""Run a benchmark so that its cleanup always runs: on success, on failure, on Ctrl-C and on SIGTERM.

`asyncio.run` already cancels the main task on the first Ctrl-C, so `finally` blocks (dropping schemas,
deleting MediaMTX paths) get to run; `run_cleanly` does the same for SIGTERM, which would otherwise kill the
process in the middle and leave what the benchmark created on the shared stack.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_cleanly"]

T = TypeVar("T")


def run_cleanly(main: Coroutine[Any, Any, T]) -> T:
    async def guarded() -> T:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await main

    return asyncio.run(guarded())
