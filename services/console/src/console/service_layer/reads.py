"""Reading a page's answers: independent reads at the same time, and reads a page can do without."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from console.service_layer.ports import ApiError


async def concurrently(*reads: Awaitable[Any]) -> list[Any]:
    """Independent API reads of one page, at the same time; their answers in order. Each read runs to its
    end (none is left behind a failed one), then the first ApiError in argument order is raised."""
    answers = await asyncio.gather(*reads, return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers


async def optional(read: Awaitable[Any]) -> Any:
    """The answer of a read the page can do without, or None when the service refused it."""
    try:
        return await read
    except ApiError:
        return None
