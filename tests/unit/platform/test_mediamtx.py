"""The shared MediaMTX client's enumeration deadline and URL setting (no network: httpx.MockTransport)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from yovision_platform.mediamtx import MediaMtxApi, MediaMtxError, validate_api_url


def slow_pages(pages: int, seconds_per_page: float) -> httpx.MockTransport:
    async def handle(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(seconds_per_page)
        page = int(request.url.params["page"])
        return httpx.Response(200, json={"pageCount": pages, "items": [{"name": f"p{page}"}]})

    return httpx.MockTransport(handle)


async def test_the_whole_enumeration_runs_under_one_deadline() -> None:
    # Each page is well within the deadline; all ten together are not.
    client = MediaMtxApi("http://mediamtx.test", deadline_seconds=0.3, transport=slow_pages(10, 0.05))
    with pytest.raises(MediaMtxError) as raised:
        await client.list_path_names()
    assert raised.value.code == "mediamtx_timeout"
    await client.aclose()


async def test_an_enumeration_within_the_deadline_returns_every_page() -> None:
    client = MediaMtxApi("http://mediamtx.test", deadline_seconds=2.0, transport=slow_pages(4, 0.01))
    assert await client.list_path_names() == ["p0", "p1", "p2", "p3"]
    await client.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1:9997",
        "http://user:pw@127.0.0.1:9997",
        "https://:pw@127.0.0.1",
        "http://h/?q=1",
        "http://",
    ],
)
def test_api_urls_with_credentials_queries_or_other_schemes_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match="without credentials or query"):
        validate_api_url(url)


def test_an_api_url_loses_its_trailing_slash() -> None:
    assert validate_api_url("http://127.0.0.1:9997/") == "http://127.0.0.1:9997"
