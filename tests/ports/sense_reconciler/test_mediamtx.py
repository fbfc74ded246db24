"""The `MediaMtxPort`: the real client against the real MediaMTX of the stack, the same client against the
HTTP-level fake (tests/support/fake_mediamtx.py) and the in-memory fake of the use-case tests
behave alike on every call the reconciler makes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.memory import MemoryMediaMtx
from sense_reconciler.domain.reconcile import PathConfig
from sense_reconciler.service_layer.ports import MediaMtxPort
from tests.support.fake_mediamtx import FakeMediaMtx
from tests.support.stack import Stack
from yovision_platform.mediamtx import MediaMtxError

CAMERA = PathConfig("rtsp://u:cam-pw@127.0.0.1:1/stream")
OTHER = PathConfig("rtsp://127.0.0.1:1/other", source_on_demand=False)


READ_BACK_SECONDS = 5.0


async def read_back(mediamtx: MediaMtxPort, name: str, expected: PathConfig | None) -> PathConfig | None:
    """The path as read back once it shows `expected`, or as last read when it did not in time. MediaMTX
    applies a configuration change asynchronously: a read right after the write may see the one before."""
    deadline = time.monotonic() + READ_BACK_SECONDS
    while True:
        current = await mediamtx.get_path(name)
        if current == expected or time.monotonic() > deadline:
            return current
        await asyncio.sleep(0.05)


class MediaMtxContract:
    @pytest.fixture
    def mediamtx(self) -> MediaMtxPort:
        raise NotImplementedError

    @pytest.fixture
    def name(self) -> str:
        """A path name no other test (nor any other user of the shared MediaMTX) has."""
        return f"contract-{uuid.uuid4().hex[:12]}/cam-1"

    async def test_a_missing_path_reads_as_none(self, mediamtx: MediaMtxPort, name: str) -> None:
        assert await read_back(mediamtx, name, None) is None

    @pytest.mark.parametrize("config", [CAMERA, OTHER])
    async def test_an_added_path_reads_back_as_configured(
        self, mediamtx: MediaMtxPort, name: str, config: PathConfig
    ) -> None:
        await mediamtx.add_path(name, config)
        assert await read_back(mediamtx, name, config) == config

    async def test_adding_a_path_that_exists_is_refused_with_http_400(
        self, mediamtx: MediaMtxPort, name: str
    ) -> None:
        await mediamtx.add_path(name, CAMERA)
        with pytest.raises(MediaMtxError) as refused:
            await mediamtx.add_path(name, OTHER)
        assert (refused.value.code, refused.value.status) == ("mediamtx_http_400", 400)
        assert await read_back(mediamtx, name, CAMERA) == CAMERA

    @pytest.mark.parametrize("action", ["add", "replace"])
    async def test_a_source_mediamtx_cannot_take_is_refused_with_http_400_and_a_redacted_reason(
        self, mediamtx: MediaMtxPort, name: str, action: str
    ) -> None:
        refused_source = PathConfig("RTSP://u:cam-pw@127.0.0.1:1/stream")
        call = mediamtx.add_path if action == "add" else mediamtx.replace_path
        with pytest.raises(MediaMtxError) as refused:
            await call(name, refused_source)
        error = refused.value
        assert (error.code, error.status, error.reason) == (
            "mediamtx_http_400",
            400,
            "invalid source: <redacted>",
        )
        assert "cam-pw" not in repr(error) and "cam-pw" not in str(error.reason)
        assert await read_back(mediamtx, name, None) is None

    async def test_a_replace_changes_a_path_and_creates_a_missing_one(
        self, mediamtx: MediaMtxPort, name: str
    ) -> None:
        await mediamtx.add_path(name, CAMERA)
        await mediamtx.replace_path(name, OTHER)
        assert await read_back(mediamtx, name, OTHER) == OTHER
        missing = name.replace("cam-1", "cam-2")
        await mediamtx.replace_path(missing, CAMERA)
        assert await read_back(mediamtx, missing, CAMERA) == CAMERA

    async def test_a_delete_removes_exactly_the_path_and_a_second_is_a_no_op(
        self, mediamtx: MediaMtxPort, name: str
    ) -> None:
        sibling = name.replace("cam-1", "cam-10")
        await mediamtx.add_path(name, CAMERA)
        await mediamtx.add_path(sibling, OTHER)
        assert await mediamtx.delete_path(name) is True
        assert await read_back(mediamtx, name, None) is None
        assert await mediamtx.delete_path(name) is False
        assert await read_back(mediamtx, sibling, OTHER) == OTHER


class TestRealMediaMtx(MediaMtxContract):
    @pytest.fixture
    async def mediamtx(self, stack: Stack, name: str) -> AsyncIterator[MediaMtxPort]:
        client = MediaMtxClient(
            stack.mediamtx_api_url, credentials=stack.mediamtx_credentials(), deadline_seconds=5.0
        )
        try:
            yield client
        finally:
            for suffix in ("cam-1", "cam-2", "cam-10"):
                await client.delete_path(name.replace("cam-1", suffix))
            await client.aclose()


class TestHttpFakeMediaMtx(MediaMtxContract):
    @pytest.fixture
    async def mediamtx(self) -> AsyncIterator[MediaMtxPort]:
        client = MediaMtxClient("http://mediamtx.test:9997", transport=FakeMediaMtx().transport())
        yield client
        await client.aclose()


class TestMemoryMediaMtx(MediaMtxContract):
    @pytest.fixture
    def mediamtx(self) -> MediaMtxPort:
        return MemoryMediaMtx()
