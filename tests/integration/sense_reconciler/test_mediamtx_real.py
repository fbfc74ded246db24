"""The MediaMTX client against the real MediaMTX Control API of the local stack (unique path names)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.domain.reconcile import PathConfig
from tests.conftest import Stack


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
    assert await mediamtx.get_path(first) is None
    await mediamtx.add_path(first, config)
    await mediamtx.add_path(other, config)
    assert await mediamtx.get_path(first) == config
    await mediamtx.replace_path(first, PathConfig("rtsp://127.0.0.1:1/b"))
    assert await mediamtx.get_path(first) == PathConfig("rtsp://127.0.0.1:1/b")
    assert await mediamtx.delete_path(first) is True
    assert await mediamtx.delete_path(first) is False
    assert await mediamtx.get_path(first) is None
    assert await mediamtx.get_path(other) == config


async def test_enumeration_is_paged_sorted_and_unique(mediamtx: MediaMtxClient, names: list[str]) -> None:
    for name in reversed(names):
        await mediamtx.add_path(name, PathConfig("rtsp://127.0.0.1:1/x"))
    listed = await mediamtx.list_path_names()
    assert listed == sorted(set(listed))
    assert set(names) <= set(listed)
