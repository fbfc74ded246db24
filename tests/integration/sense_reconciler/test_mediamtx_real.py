"""The MediaMTX client against the real MediaMTX Control API of the local stack (unique path names).

MediaMTX answers a config write before every read sees it (a fresh-clone run under load once read the
previous source right after a replace, and a list without the path just added), so reads after a write
wait, bounded, for the state the write asked for."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.domain.reconcile import PathConfig
from tests.support.kafka import wait_until
from tests.support.stack import Stack

READ_SEES_WRITE_SECONDS = 10.0


@pytest.fixture
async def mediamtx(stack: Stack) -> AsyncIterator[MediaMtxClient]:
    client = MediaMtxClient(
        stack.mediamtx_api_url, credentials=stack.mediamtx_credentials(), deadline_seconds=5.0, page_items=2
    )
    yield client
    await client.aclose()


@pytest.fixture
async def names(mediamtx: MediaMtxClient) -> AsyncIterator[list[str]]:
    prefix = f"t-{uuid.uuid4().hex[:8]}"
    created = [f"{prefix}-{i}" for i in range(3)]
    yield created
    for name in created:
        await mediamtx.delete_path(name)


async def test_add_get_replace_and_exact_delete(mediamtx: MediaMtxClient, names: list[str]) -> None:
    first, other, _ = names
    config = PathConfig("rtsp://user:pw@127.0.0.1:1/a")
    replaced = PathConfig("rtsp://127.0.0.1:1/b")

    async def reads(name: str, expected: PathConfig | None) -> None:
        async def seen() -> bool:
            return await mediamtx.get_path(name) == expected

        await wait_until(seen, timeout_seconds=READ_SEES_WRITE_SECONDS)

    assert await mediamtx.get_path(first) is None
    await mediamtx.add_path(first, config)
    await mediamtx.add_path(other, config)
    await reads(first, config)
    await mediamtx.replace_path(first, replaced)
    await reads(first, replaced)
    assert await mediamtx.delete_path(first) is True
    await reads(first, None)
    assert await mediamtx.delete_path(first) is False
    assert await mediamtx.get_path(other) == config


async def test_enumeration_is_paged_sorted_and_unique(mediamtx: MediaMtxClient, names: list[str]) -> None:
    for name in reversed(names):
        await mediamtx.add_path(name, PathConfig("rtsp://127.0.0.1:1/x"))
    listings: list[list[str]] = []

    async def all_listed() -> bool:
        listings.append(await mediamtx.list_path_names())
        return set(names) <= set(listings[-1])

    await wait_until(all_listed, timeout_seconds=READ_SEES_WRITE_SECONDS)
    assert all(listed == sorted(set(listed)) for listed in listings)
