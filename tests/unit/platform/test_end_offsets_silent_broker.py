"""`fetch_end_offsets` against a broker that accepts connections and never answers (a node restarting,
a SIGSTOPped one): a timeout within its bound, and no connection left open. Its bound cancels the clients'
start; a cancelled start of aiokafka's admin client left its bootstrap connection open (see
`yovision_platform.messaging`), this one must not."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator

import pytest

from yovision_platform.messaging import fetch_end_offsets

BOUND_SECONDS = 2.0


class SilentBroker:
    """Accepts connections, reads what comes and answers nothing; knows which connections are still open."""

    def __init__(self) -> None:
        self.open_connections = 0
        self.all_closed = asyncio.Event()
        self._writers: list[asyncio.StreamWriter] = []

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        self._writers.append(writer)
        while await reader.read(4096):  # until the client closes its side
            pass
        self.open_connections -= 1
        if not self.open_connections:
            self.all_closed.set()

    def close(self) -> None:
        for writer in self._writers:
            writer.close()


@pytest.fixture
async def silent_broker() -> AsyncIterator[tuple[str, SilentBroker]]:
    broker = SilentBroker()
    server = await asyncio.start_server(broker.accept, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", broker
    finally:
        broker.close()
        server.close()
        await server.wait_closed()


async def test_a_silent_broker_fails_within_the_bound_and_leaves_no_connection(
    silent_broker: tuple[str, SilentBroker],
) -> None:
    address, broker = silent_broker
    started = time.monotonic()
    with pytest.raises(Exception) as failed:  # noqa: PT011 - the kind is checked below
        await fetch_end_offsets(address, ["t"], client_id="silent", timeout_seconds=BOUND_SECONDS)
    took = time.monotonic() - started
    assert "Timeout" in type(failed.value).__name__, repr(failed.value)
    assert took < BOUND_SECONDS + 1.0, took
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(broker.all_closed.wait(), 2.0)
    assert broker.open_connections == 0, "a connection to the broker was left open"
    gc.collect()  # an unclosed aiokafka connection also warns here (an error under the suite's warnings)
