"""The signed batch endpoint over real HTTP and PostgreSQL: body limits on the wire (declared, streamed,
chunked, a lying Content-Length), per-item results stored by the real insert, one outcome per nonce under
concurrency. Per-item results: tests/unit/bell_receiver/test_audit_batch_receiver.py; envelope, batch-size
and media-type refusals: tests/unit/bell_receiver/test_audit_batch_api.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.support.audit_push_client import batch_body, fact
from tests.support.bell_receiver_fixtures import TEST_DEADLINE_SECONDS, Served
from yovision_platform.audit_push import BATCH_PATH, MAX_BODY_BYTES


def padded(items: list[object], size: int) -> bytes:
    """A valid batch body of exactly `size` bytes (JSON allows trailing whitespace)."""
    body = batch_body(items)
    assert len(body) <= size
    return body + b" " * (size - len(body))


async def raw_exchange(
    served: Served, head: bytes, body_parts: list[bytes], wait_seconds: float = 5.0
) -> bytes:
    """Send raw HTTP bytes on one connection and return the status line of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(head)
        for part in body_parts:
            writer.write(part)
        await writer.drain()
        return await asyncio.wait_for(reader.readline(), wait_seconds)
    finally:
        writer.close()


def request_head(served: Served, body: bytes, extra_headers: str) -> bytes:
    signed = served.relay.sign(body)
    lines = [
        f"POST {BATCH_PATH} HTTP/1.1",
        f"Host: 127.0.0.1:{served.port}",
        "Content-Type: application/json",
    ]
    lines += [f"{name}: {value}" for name, value in signed.items()]
    return ("\r\n".join(lines) + "\r\n" + extra_headers + "\r\n").encode()


async def test_a_body_of_exactly_one_mib_is_accepted(served: Served) -> None:
    response = await served.relay.post_raw(padded([fact()], MAX_BODY_BYTES))
    assert response.status_code == 200
    assert response.json()["results"][0]["status"] == "accepted"


async def test_one_mib_plus_one_is_refused(served: Served) -> None:
    body = padded([fact()], MAX_BODY_BYTES + 1)
    status = await raw_exchange(
        served, request_head(served, body, f"Content-Length: {len(body)}\r\n"), [body]
    )
    assert status.startswith(b"HTTP/1.1 413")
    assert served.metric("bell_audit_push_requests_total", outcome="body_too_large") == 1


async def test_a_declared_oversized_body_is_refused_before_it_is_sent(served: Served) -> None:
    head = request_head(served, b"", f"Content-Length: {MAX_BODY_BYTES + 1}\r\n")
    status = await raw_exchange(served, head, [], wait_seconds=TEST_DEADLINE_SECONDS / 2)
    assert status.startswith(b"HTTP/1.1 413")


def chunked(body: bytes, chunk_bytes: int = 64 * 1024) -> list[bytes]:
    parts = [body[i : i + chunk_bytes] for i in range(0, len(body), chunk_bytes)]
    return [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"]


@pytest.mark.parametrize(("size", "status"), [(MAX_BODY_BYTES, b"200"), (MAX_BODY_BYTES + 1, b"413")])
async def test_a_chunked_body_without_content_length_is_counted_while_streaming(
    served: Served, size: int, status: bytes
) -> None:
    body = padded([fact()], size)
    head = request_head(served, body, "Transfer-Encoding: chunked\r\n")
    answer = await raw_exchange(served, head, chunked(body))
    assert answer.startswith(b"HTTP/1.1 " + status)


async def test_a_content_length_larger_than_the_body_times_out_at_the_deadline(served: Served) -> None:
    body = batch_body([fact()])
    head = request_head(served, body, f"Content-Length: {len(body) + 10}\r\n")
    answer = await raw_exchange(served, head, [body], wait_seconds=TEST_DEADLINE_SECONDS + 3)
    assert answer.startswith(b"HTTP/1.1 408")
    assert served.metric("bell_audit_push_requests_total", outcome="request_timeout") == 1


async def test_a_streamed_body_is_signed_and_accepted(served: Served) -> None:
    body = batch_body([fact(), fact(2)])

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 100):
            yield body[start : start + 100]

    headers = {**served.relay.sign(body), "content-type": "application/json"}
    response = await served.relay.http.post(BATCH_PATH, content=stream(), headers=headers)
    assert response.status_code == 200


async def test_concurrent_requests_with_one_nonce_store_one_outcome(served: Served) -> None:
    body = batch_body([fact() for _ in range(20)])
    headers = served.relay.sign(body, nonce=uuid.uuid4().hex)
    responses = await asyncio.gather(*(served.relay.post_raw(body, headers=headers) for _ in range(4)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1
    count = await served.pool.fetchval(f'SELECT count(*) FROM "{served.schema.name}".audit_events')
    assert count == 20
