from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from sense_reconciler.adapters.mediamtx import MediaMtxClient, MediaMtxError
from sense_reconciler.domain.reconcile import PathConfig
from tests.support.fake_mediamtx import FakeMediaMtx

SECRET_URI = "rtsp://user:hunter2@10.0.0.9/stream"


def client_for(fake: FakeMediaMtx, *, page_items: int = 100, max_pages: int = 1000) -> MediaMtxClient:
    return MediaMtxClient(
        "http://mediamtx.test", transport=fake.transport(), page_items=page_items, max_pages=max_pages
    )


async def test_add_get_replace_delete_round_trip() -> None:
    fake = FakeMediaMtx()
    client = client_for(fake)
    assert await client.get_path("cam-1") is None
    await client.add_path("cam-1", PathConfig(SECRET_URI))
    assert await client.get_path("cam-1") == PathConfig(SECRET_URI)
    await client.replace_path("cam-1", PathConfig("rtsp://h/other"))
    assert fake.paths["cam-1"]["source"] == "rtsp://h/other"
    assert await client.delete_path("cam-1") is True
    assert await client.delete_path("cam-1") is False
    await client.aclose()


async def test_list_walks_pages_and_returns_sorted_unique_names_only() -> None:
    fake = FakeMediaMtx()
    for i in (5, 3, 1, 4, 2):
        fake.paths[f"cam-{i}"] = {"source": SECRET_URI, "sourceOnDemand": True}
    client = client_for(fake, page_items=2)
    assert await client.list_path_names() == ["cam-1", "cam-2", "cam-3", "cam-4", "cam-5"]
    assert len([call for call in fake.calls if call[1].endswith("/list")]) == 3


async def test_list_deduplicates_names_across_pages() -> None:
    fake = FakeMediaMtx()
    fake.list_override = [
        {"pageCount": 2, "items": [{"name": "b"}, {"name": "a"}]},
        {"pageCount": 2, "items": [{"name": "a"}, {"name": "c"}]},
    ]
    assert await client_for(fake).list_path_names() == ["a", "b", "c"]


async def test_list_refuses_a_repeated_page() -> None:
    fake = FakeMediaMtx()
    page = {"pageCount": 3, "items": [{"name": "a"}, {"name": "b"}]}
    fake.list_override = [page, page, page]
    with pytest.raises(MediaMtxError) as err:
        await client_for(fake).list_path_names()
    assert err.value.code == "mediamtx_duplicate_page"


@pytest.mark.parametrize("pages", [2, 3])
async def test_list_stops_at_the_page_cap(pages: int) -> None:
    fake = FakeMediaMtx()
    fake.list_override = [{"pageCount": pages, "items": [{"name": f"p{i}"}]} for i in range(pages)]
    client = client_for(fake, max_pages=2)
    if pages <= 2:
        assert await client.list_path_names() == ["p0", "p1"]
    else:
        with pytest.raises(MediaMtxError) as err:
            await client.list_path_names()
        assert err.value.code == "mediamtx_page_cap"


@pytest.mark.parametrize(
    "page",
    [
        {"items": [{"name": "a"}]},
        {"pageCount": 1},
        {"pageCount": 1, "items": [{"source": SECRET_URI}]},
        {"pageCount": 1, "items": [{"name": 7}]},
        {"pageCount": "1", "items": []},
    ],
)
async def test_list_refuses_missing_or_mistyped_fields_without_echoing_them(
    page: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeMediaMtx()
    fake.list_override = [page]
    caplog.set_level(logging.DEBUG)
    with pytest.raises(MediaMtxError) as err:
        await client_for(fake).list_path_names()
    assert err.value.code == "mediamtx_bad_response"
    assert "hunter2" not in str(err.value) and "hunter2" not in caplog.text


async def test_http_errors_become_stable_codes() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(500, text="boom " + SECRET_URI))
    client = MediaMtxClient("http://mediamtx.test", transport=transport)
    with pytest.raises(MediaMtxError) as err:
        await client.add_path("cam-1", PathConfig(SECRET_URI))
    assert err.value.code == "mediamtx_http_500"
    assert "hunter2" not in str(err.value)


async def test_each_call_is_bounded_by_the_deadline() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200, json={})

    client = MediaMtxClient(
        "http://mediamtx.test", transport=httpx.MockTransport(slow), deadline_seconds=0.05
    )
    with pytest.raises(MediaMtxError) as err:
        await client.get_path("cam-1")
    assert err.value.code == "mediamtx_timeout"


async def test_invalid_path_names_never_reach_the_server() -> None:
    fake = FakeMediaMtx()
    for bad in ("../all", "cam//front", "~^cam.*$", "all_others", "cam/./x", ""):
        with pytest.raises(MediaMtxError) as raised:
            await client_for(fake).delete_path(bad)
        assert raised.value.code == "mediamtx_unmanaged_name"
    assert fake.calls == []
