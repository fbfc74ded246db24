"""The MediaMTX port (`MediaMtxPaths`): what the scan and apply rely on, proven alike for

- the platform client (`MediaMtxApi`) against the real MediaMTX program (a private sandbox per server, as
  the integration tests use it, so a test alone decides which paths exist; a recording proxy in front
  refuses the deletes a test names);
- the same client over `tests/fake_mediamtx.FakeMediaMtx` (the HTTP-level fake of the Control API the
  client's unit tests use);
- the in-memory fake of the port (`orphan_scanner.adapters.memory.MemoryMediaMtxPaths`), which the use-case
  tests use.

MediaMTX applies a change asynchronously: a list right after a delete may still show the name, so a test
reads the list until it shows what it expects (bounded), as an operator re-running `report` would.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from pathlib import Path

import httpx
import pytest

from orphan_scanner.adapters.memory import MemoryMediaMtxPaths
from orphan_scanner.service_layer.ports import MediaMtxPaths
from tests.support.fake_mediamtx import PREFIX, FakeMediaMtx
from tests.support.mediamtx_proxy import MediaMtxProxy
from tests.support.private_mediamtx import private_mediamtx, read_until
from yovision_platform.mediamtx import MediaMtxApi, MediaMtxError

DEADLINE_SECONDS = 5.0
UNREACHABLE_URL = "http://127.0.0.1:9"  # the discard port: nothing listens there
PAGE_ITEMS = 3  # the real client walks several pages even for a handful of paths
HAND_MADE_REGEX = "~^hand-[0-9]+$"  # MediaMTX lists regex paths too; a delete never names one
NAMES = ["site-1/cam-07", "cam-2", "cam-10", "a_b", "a.b", "B", "b", HAND_MADE_REGEX]
UNMANAGED = ["a//b", "all", "all_others", "../x", "x/..", "/lead", "trail/", "", HAND_MADE_REGEX]

Serve = Callable[..., Awaitable[MediaMtxPaths]]


async def listed_when(paths: MediaMtxPaths, settled: Callable[[list[str]], bool]) -> list[str]:
    """The list once `settled(names)`, or what it shows after the bound."""
    return await read_until(paths.list_path_names, settled)


async def error_code(call: Awaitable[object]) -> str:
    with pytest.raises(MediaMtxError) as failed:
        await call
    return failed.value.code


class MediaMtxContract:
    """Each adapter gives `serve(names, refuse_deletes=())` (a server holding exactly `names`; a delete of a
    name in `refuse_deletes` is answered 500) and `unreachable`."""

    async def test_an_empty_server_lists_nothing(self, serve: Serve) -> None:
        paths = await serve([])
        assert await paths.list_path_names() == []
        assert paths.deadline_seconds == DEADLINE_SECONDS

    async def test_every_name_is_listed_sorted_and_once(self, serve: Serve) -> None:
        paths = await serve(NAMES)
        assert await paths.list_path_names() == sorted(NAMES)

    async def test_a_delete_removes_exactly_that_name(self, serve: Serve) -> None:
        paths = await serve(["cam-1", "cam-10", "site-1/cam-1", "site-1/cam-07"])
        assert await paths.delete_path("cam-1") is True
        assert await paths.delete_path("site-1/cam-07") is True
        expected = ["cam-10", "site-1/cam-1"]
        assert await listed_when(paths, lambda names: names == expected) == expected
        assert await paths.delete_path("cam-1") is False  # already gone: done
        assert await paths.delete_path("never-there") is False

    async def test_an_unmanaged_name_is_refused_before_anything_is_sent(self, serve: Serve) -> None:
        paths = await serve(["all-cams", HAND_MADE_REGEX])
        for name in UNMANAGED:
            assert await error_code(paths.delete_path(name)) == "mediamtx_unmanaged_name", name
        assert await paths.list_path_names() == sorted(["all-cams", HAND_MADE_REGEX])

    async def test_a_refused_delete_fails_with_its_status_and_keeps_the_path(self, serve: Serve) -> None:
        paths = await serve(["cam-1", "cam-2"], refuse_deletes={"cam-1"})
        assert await error_code(paths.delete_path("cam-1")) == "mediamtx_http_500"
        assert await paths.delete_path("cam-2") is True
        assert await listed_when(paths, lambda names: names == ["cam-1"]) == ["cam-1"]

    async def test_an_unreachable_server_fails_every_call(self, unreachable: MediaMtxPaths) -> None:
        assert await error_code(unreachable.list_path_names()) == "mediamtx_unreachable"
        assert await error_code(unreachable.delete_path("cam-1")) == "mediamtx_unreachable"
        assert await error_code(unreachable.delete_path("a//b")) == "mediamtx_unmanaged_name"


class TestRealMediaMtx(MediaMtxContract):
    @pytest.fixture
    async def serve(self, tmp_path: Path) -> AsyncIterator[Serve]:
        labels = itertools.count()
        async with contextlib.AsyncExitStack() as stack:

            async def serve(names: Iterable[str], refuse_deletes: Collection[str] = ()) -> MediaMtxPaths:
                label = f"server-{next(labels)}"
                server = await stack.enter_async_context(private_mediamtx(tmp_path, list(names), label=label))
                url = server.url
                if refuse_deletes:
                    proxy = MediaMtxProxy(server.url)
                    proxy.refuse_deletes = set(refuse_deletes)
                    url = (await stack.enter_async_context(proxy.running())).url
                client = MediaMtxApi(
                    url,
                    deadline_seconds=DEADLINE_SECONDS,
                    page_items=PAGE_ITEMS,
                    credentials=server.sandbox.credentials,
                )
                stack.push_async_callback(client.aclose)
                return client

            yield serve

    @pytest.fixture
    async def unreachable(self) -> AsyncIterator[MediaMtxPaths]:
        client = MediaMtxApi(UNREACHABLE_URL, deadline_seconds=DEADLINE_SECONDS)
        yield client
        await client.aclose()


class RefusingFakeMediaMtx(FakeMediaMtx):
    def __init__(self, refuse_deletes: Collection[str]) -> None:
        super().__init__()
        self.refuse_deletes = set(refuse_deletes)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if (
            request.method == "DELETE"
            and request.url.path.removeprefix(PREFIX + "delete/") in self.refuse_deletes
        ):
            return httpx.Response(500, json={"status": "error", "error": "refused by the test"})
        return super().handle(request)


def refuse_to_connect(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


class TestHttpFakeMediaMtx(MediaMtxContract):
    @pytest.fixture
    def serve(self) -> Serve:
        async def serve(names: Iterable[str], refuse_deletes: Collection[str] = ()) -> MediaMtxPaths:
            fake = RefusingFakeMediaMtx(refuse_deletes)
            fake.paths = {name: {"source": "rtsp://127.0.0.1:1/x"} for name in names}
            return MediaMtxApi(
                "http://mediamtx.test",
                deadline_seconds=DEADLINE_SECONDS,
                page_items=PAGE_ITEMS,
                transport=fake.transport(),
            )

        return serve

    @pytest.fixture
    def unreachable(self) -> MediaMtxPaths:
        return MediaMtxApi(
            "http://mediamtx.test",
            deadline_seconds=DEADLINE_SECONDS,
            transport=httpx.MockTransport(refuse_to_connect),
        )


class TestMemoryMediaMtxPaths(MediaMtxContract):
    @pytest.fixture
    def serve(self) -> Serve:
        async def serve(names: Iterable[str], refuse_deletes: Collection[str] = ()) -> MediaMtxPaths:
            paths = MemoryMediaMtxPaths(names, deadline_seconds=DEADLINE_SECONDS)
            paths.refuse_deletes = set(refuse_deletes)
            return paths

        return serve

    @pytest.fixture
    def unreachable(self) -> MediaMtxPaths:
        paths = MemoryMediaMtxPaths(["cam-1"], deadline_seconds=DEADLINE_SECONDS)
        paths.unreachable = True
        return paths
