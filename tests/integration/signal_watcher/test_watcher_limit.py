"""The per-user cap under concurrency, on PostgreSQL: creates of one user are serialized by the user's
transaction lock, so however many arrive at once, exactly the cap's worth is created. (The fakes are
serial by design, so this proof stays here; the cap's boundaries: tests/unit/signal_watcher.)"""

from __future__ import annotations

import asyncio

import pytest

from signal_watcher.adapters.memory import MemoryProbe
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.errors import LimitReached
from signal_watcher.domain.model import CompareMode, Method, WatcherSpec
from tests.support.signal_watcher_fixtures import use_cases_on

CAP = 3
CONCURRENT_CREATES = 12
DRAFT = WatcherSpec(
    "w", "agent-1", "https://example.com/", Method.GET, (), None, 60, CompareMode.HASH, None, "{diff}"
)


@pytest.mark.parametrize("existing", [0, CAP - 1])
async def test_concurrent_creates_never_pass_the_cap(units: PostgresUnitsOfWork, existing: int) -> None:
    watchers = use_cases_on(
        units, MemoryProbe(names={"example.com": ["93.184.216.34"]}), max_watchers_per_user=CAP
    ).watchers
    for _ in range(existing):
        await watchers.create("alice", DRAFT)
    gate = asyncio.Event()

    async def create() -> str:
        await gate.wait()
        try:
            await watchers.create("alice", DRAFT)
        except LimitReached:
            return "refused"
        return "created"

    tasks = [asyncio.create_task(create()) for _ in range(CONCURRENT_CREATES)]
    await asyncio.sleep(0)  # every task waits at the gate
    gate.set()
    outcomes = await asyncio.gather(*tasks)
    assert outcomes.count("created") == CAP - existing
    assert outcomes.count("refused") == CONCURRENT_CREATES - (CAP - existing)
    async with units() as uow:
        assert await uow.watchers.count_for_user("alice") == CAP
