"""Which device-topic partitions this instance may reconcile, fed by the consumer group's rebalances."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable

from aiokafka import TopicPartition


class OwnedPartitions:
    """The claimable partition set plus wake-up signals (one per writer: `wake` sets every one).

    `revoke` removes partitions synchronously, so a claim that starts after it returns can no longer take
    them; rows already claimed stay fenced by their DB lease, and each is re-checked before it is worked on
    (not owned any more: released untouched).
    """

    def __init__(self, topic: str, *, drain_timeout_seconds: float = 0.0) -> None:
        self.topic = topic
        self._owned: set[int] = set()
        self._wake = asyncio.Event()
        self._signals: list[asyncio.Event] = [self._wake]
        self._in_flight: dict[int, int] = {}
        self._idle = asyncio.Condition()
        self._drain_timeout = drain_timeout_seconds

    def snapshot(self) -> frozenset[int]:
        return frozenset(self._owned)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def assign(self, partitions: Iterable[int]) -> None:
        self._owned.update(partitions)
        self.wake()

    def revoke(self, partitions: Iterable[int]) -> None:
        self._owned.difference_update(partitions)

    def wake(self) -> None:
        for signal in self._signals:
            signal.set()

    def wake_for(self, partitions: Iterable[int]) -> None:
        """Wake the writers when this instance owns one of `partitions` (devices of theirs became due)."""
        if not self._owned.isdisjoint(partitions):
            self.wake()

    def new_signal(self) -> asyncio.Event:
        """A wake-up signal of its own for one more waiter (each writer waits on its own)."""
        signal = asyncio.Event()
        self._signals.append(signal)
        return signal

    async def wait(self, timeout_seconds: float, signal: asyncio.Event | None = None) -> bool:
        """Wait for a wake-up (True) or the timeout (False); clears the signal (default: the first)."""
        signal = signal or self._wake
        try:
            await asyncio.wait_for(signal.wait(), timeout_seconds)
            return True
        except TimeoutError:
            return False
        finally:
            signal.clear()

    @contextlib.asynccontextmanager
    async def working(self, partition: int) -> AsyncIterator[None]:
        """Mark one item of `partition` as in flight (see `drain`)."""
        self._in_flight[partition] = self._in_flight.get(partition, 0) + 1
        try:
            yield
        finally:
            async with self._idle:
                self._in_flight[partition] -= 1
                self._idle.notify_all()

    async def drain(self, partitions: set[int]) -> bool:
        """Wait (at most the drain timeout) until no item of `partitions` is in flight; False on timeout."""

        def idle() -> bool:
            return not any(self._in_flight.get(p, 0) for p in partitions)

        async with self._idle:
            try:
                await asyncio.wait_for(self._idle.wait_for(idle), self._drain_timeout)
            except TimeoutError:
                return idle()
        return True

    async def on_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assign(tp.partition for tp in assigned if tp.topic == self.topic)

    async def on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Stop claiming the revoked partitions, then let an item already running on one of them finish
        (bounded by the drain timeout; its writes stay fenced either way) before Kafka moves them."""
        partitions = {tp.partition for tp in revoked if tp.topic == self.topic}
        self.revoke(partitions)
        await self.drain(partitions)
