"""What media-worker's upload tests send, on the fakes (tests/unit) as on PostgreSQL (tests/integration):
small limits, multipart bodies, chunked sessions through the HTTP API."""

from __future__ import annotations

import os
import uuid
from typing import Protocol

import httpx

from media_worker.domain.limits import Limits

__all__ = [
    "BOUNDARY",
    "SMALL_LIMITS",
    "Caller",
    "init",
    "multipart_body",
    "multipart_headers",
    "upload_chunked",
    "upload_plain_at_the_limit",
]

# Small limits so that files stay tiny; the SPEC defaults are tested in test_limits.py.
SMALL_LIMITS = Limits(
    plain_upload_max_bytes=4096,
    chunked_required_from_bytes=2048,
    chunk_max_bytes=1024,
    chunk_min_bytes=10,
    source_max_bytes=8 * 1024,
    max_concurrent_chunk_writes=2,
    chunk_slot_wait_seconds=0.3,
    free_space_safety_margin_bytes=1000,
    merge_headroom_bytes=1000,
)
BOUNDARY = "media-test-boundary"


class Caller(Protocol):
    def auth(self, subject: str = ..., *permissions: str) -> dict[str, str]: ...


def multipart_body(content: bytes, *, pad_to: int | None = None) -> bytes:
    """One part named `file`; `pad_to` pads the part's headers so that the whole body has that length."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.mp4"\r\n'
        "Content-Type: video/mp4\r\n"
    )
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    body = head.encode() + b"\r\n" + content + tail
    if pad_to is not None:
        extra = pad_to - len(body) - len("X-Pad: \r\n")
        assert extra >= 0
        body = (head + f"X-Pad: {'p' * extra}\r\n").encode() + b"\r\n" + content + tail
        assert len(body) == pad_to
    return body


def multipart_headers(caller: Caller, subject: str = "user-1") -> dict[str, str]:
    return {**caller.auth(subject), "Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


async def upload_plain_at_the_limit(
    client: httpx.AsyncClient, caller: Caller, limits: Limits
) -> tuple[uuid.UUID, bytes]:
    """A plain upload of the largest source and request `limits` accept; the material and its source."""
    content = os.urandom(limits.chunked_required_from_bytes - 1)
    body = multipart_body(content, pad_to=limits.plain_upload_max_bytes)
    response = await client.post("/v1/materials?title=clip", content=body, headers=multipart_headers(caller))
    assert (response.status_code, response.json()["status"]) == (201, "pending"), response.text
    return uuid.UUID(response.json()["material_id"]), content


async def init(
    client: httpx.AsyncClient, caller: Caller, total: int, chunk: int, key: str = "k1"
) -> httpx.Response:
    return await client.post(
        "/v1/uploads",
        json={"upload_key": key, "total_bytes": total, "chunk_bytes": chunk, "title": "t"},
        headers=caller.auth(),
    )


async def upload_chunked(client: httpx.AsyncClient, caller: Caller, data: bytes, chunk: int) -> str:
    """A chunked session of `data` with every chunk stored (not completed); its id."""
    response = await init(client, caller, len(data), chunk)
    assert response.status_code == 201, response.text
    session_id = response.json()["session_id"]
    for index in range(response.json()["chunk_count"]):
        part = data[index * chunk : (index + 1) * chunk]
        put = await client.put(
            f"/v1/uploads/{session_id}/chunks/{index}", content=part, headers=caller.auth()
        )
        assert put.status_code == 200, put.text
    return str(session_id)
