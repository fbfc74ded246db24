"""The shared MediaMTX client: enumeration deadline, URL setting, path names, encoding and credentials (no
network: httpx.MockTransport; the same against the real MediaMTX in tests/integration)."""

from __future__ import annotations

import asyncio
import base64

import httpx
import pytest

from yovision_platform.mediamtx import (
    MediaMtxApi,
    MediaMtxCredentials,
    MediaMtxError,
    is_managed_path_name,
    validate_api_url,
)


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


@pytest.mark.parametrize(
    "name",
    ["cam-07", "site-1/cam-07", "a/b/c", "Site_1/cam.07", "_x", "-x", ".x", "a/.../b", "x" * 255],
)
def test_names_as_operators_write_them_are_managed(name: str) -> None:
    assert is_managed_path_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "./a", "a/..", "x" * 256,
        "a b", "a~b", "~^cam$", "a%2Fb", "all", "all_others", "caméra",
    ],
)  # fmt: skip
def test_names_that_cannot_be_one_exact_path_are_refused_before_a_request(name: str) -> None:
    assert not is_managed_path_name(name)
    requests: list[httpx.Request] = []
    client = MediaMtxApi("http://mediamtx.test", deadline_seconds=1.0, transport=recording(requests))
    with pytest.raises(MediaMtxError) as raised:
        asyncio.run(client.delete_path(name))
    assert raised.value.code == "mediamtx_unmanaged_name" and requests == []


def recording(requests: list[httpx.Request], status: int = 200) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(status, json={"status": "ok"})

    return httpx.MockTransport(handle)


async def test_a_slash_name_is_sent_as_path_segments() -> None:
    requests: list[httpx.Request] = []
    client = MediaMtxApi("http://mediamtx.test", deadline_seconds=1.0, transport=recording(requests))
    await client.delete_path("site-1/cam.07")
    await client.add_path_object("a/_b-c", {"source": "rtsp://127.0.0.1:1/x"})
    assert [r.url.raw_path for r in requests] == [
        b"/v3/config/paths/delete/site-1/cam.07",
        b"/v3/config/paths/add/a/_b-c",
    ]
    await client.aclose()


async def test_credentials_go_as_basic_auth_and_never_into_errors() -> None:
    requests: list[httpx.Request] = []
    credentials = MediaMtxCredentials.parse("sense-api:pa:ss-w0rd")
    assert credentials.user == "sense-api" and "pa:ss" not in repr(credentials)
    client = MediaMtxApi(
        "http://mediamtx.test",
        deadline_seconds=1.0,
        transport=recording(requests, status=401),
        credentials=credentials,
    )
    with pytest.raises(MediaMtxError) as raised:
        await client.get_path_object("cam-1")
    assert raised.value.code == "mediamtx_http_401" and "pa:ss" not in str(raised.value)
    expected = "Basic " + base64.b64encode(b"sense-api:pa:ss-w0rd").decode()
    assert requests[0].headers["authorization"] == expected
    await client.aclose()


@pytest.mark.parametrize("text", ["", "user", ":pw", "user:", "us er:pw", "user:p w", "user:pw\nx"])
def test_malformed_credentials_are_refused_without_echoing_them(text: str) -> None:
    with pytest.raises(ValueError, match="malformed MediaMTX credentials") as raised:
        MediaMtxCredentials.parse(text)
    assert not text or text not in str(raised.value)


def answering(status: int, content: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, content=content))


SECRET_SOURCE = "rtsp://cam:s3cret-pw@10.0.0.9/live"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (
            400,
            b'{"error": "\'' + SECRET_SOURCE.encode() + b"' is not a valid URL\"}",
            "<redacted> is not a valid URL",
        ),
        (400, b'{"error": "invalid source: \'RTSP://x\'"}', "invalid source: <redacted>"),
        (
            400,
            b'{"error": "username and password must be both provided"}',
            "username and password must be both provided",
        ),
        (400, b'{"error": "saw rtsp://other:pw@h/x \\u0000 here"}', "saw <redacted> here"),
        (400, b'{"error": "a \'quoted value with \' inside\' b"}', "a <redacted> inside<redacted>"),
        (
            400,
            b"{\"error\": \"'sourceRedirect' is useless when source is not 'redirect'\"}",
            "'sourceRedirect' is useless when source is not 'redirect'",
        ),
        (400, b'{"error": "invalid path name \'a b\': x"}', "invalid path name <redacted>: x"),
        (400, b'{"error": "it\'s the ' + SECRET_SOURCE.encode() + b'"}', "it<redacted>"),
        (400, b'{"error": "' + b"x" * 300 + b'"}', "x" * 200),
        (400, b'{"error": "' + b"x" * 5000 + b'"}', None),  # a body over 4 KiB is not read
        (400, b"not json", None),
        (400, b'{"error": 5}', None),
        (400, b'{"error": "\'all quoted\'"}', "<redacted>"),
        (500, b'{"error": "database is locked"}', None),  # only refusals carry a reason
    ],
)
async def test_a_refusal_carries_mediamtx_reason_without_any_value_sent(
    status: int, body: bytes, reason: str | None
) -> None:
    client = MediaMtxApi("http://mediamtx.test", deadline_seconds=2.0, transport=answering(status, body))
    with pytest.raises(MediaMtxError) as raised:
        await client.add_path_object("cam-1", {"source": SECRET_SOURCE, "sourceOnDemand": True})
    await client.aclose()
    error = raised.value
    assert (error.code, error.status, error.reason) == (f"mediamtx_http_{status}", status, reason)
    assert "s3cret" not in repr(error) and "s3cret" not in str(error.reason)


async def test_a_call_that_gets_no_answer_has_no_status_or_reason() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    client = MediaMtxApi("http://mediamtx.test", deadline_seconds=2.0, transport=httpx.MockTransport(refuse))
    with pytest.raises(MediaMtxError) as raised:
        await client.get_path_object("cam-1")
    await client.aclose()
    assert (raised.value.code, raised.value.status, raised.value.reason) == (
        "mediamtx_unreachable",
        None,
        None,
    )
