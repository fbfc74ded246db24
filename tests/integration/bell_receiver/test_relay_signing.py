"""The signed batch endpoint over real HTTP: signature window, tampering, the uniform refusal (its exact
headers on the wire). Nonce replay: tests/unit/bell_receiver/test_audit_batch_api.py."""

from __future__ import annotations

import pytest

from tests.support.audit_push_client import batch_body, fact
from tests.support.bell_receiver_fixtures import Served
from yovision_platform.security import HEADER_KEY_ID, HEADER_NONCE, HEADER_SIGNATURE, HEADER_TIMESTAMP

UNAUTHORIZED = b'{"error":"unauthorized"}'
FIXED_NOW = 1_800_000_000


async def audit_count(served: Served) -> int:
    return int(await served.pool.fetchval(f'SELECT count(*) FROM "{served.schema.name}".audit_events'))


@pytest.mark.parametrize(
    ("skew_seconds", "accepted"), [(300, True), (-300, True), (301, False), (-301, False), (0, True)]
)
async def test_clock_skew_boundary_in_both_directions(
    served: Served, skew_seconds: int, accepted: bool
) -> None:
    served.clock.frozen = FIXED_NOW
    response = await served.relay.post_items([fact()], now=FIXED_NOW + skew_seconds)
    assert response.status_code == (200 if accepted else 401)
    assert await audit_count(served) == (1 if accepted else 0)
    if not accepted:
        assert response.content == UNAUTHORIZED
        assert served.metric("bell_audit_push_signature_rejections_total", reason="stale_timestamp") == 1


@pytest.mark.parametrize(("signed_at", "accepted"), [(-300, True), (-301, False), (300, True), (301, False)])
async def test_the_skew_window_is_whole_seconds_whatever_the_fraction_on_bells_clock(
    served: Served, signed_at: int, accepted: bool
) -> None:
    served.clock.frozen = FIXED_NOW + 0.9  # exactly 300 whole seconds from FIXED_NOW - 300 and + 300
    response = await served.relay.post_items([fact()], now=FIXED_NOW + signed_at)
    assert response.status_code == (200 if accepted else 401)


def tampered(served: Served, what: str) -> tuple[bytes, dict[str, str], str]:
    body = batch_body([fact()])
    headers = served.relay.sign(body)
    path = "/internal/v1/audit-events:batch"
    if what == "body":
        body = body.replace(b"operator:alice", b"operator:mallo")
    elif what == "path":
        path += "?x=1"
    elif what == "nonce":
        headers[HEADER_NONCE] = "0" * 32
    elif what == "signature":
        headers[HEADER_SIGNATURE] = "v1=" + "0" * 64
    elif what == "signature_format":
        headers[HEADER_SIGNATURE] = headers[HEADER_SIGNATURE].upper()
    elif what == "timestamp_format":
        headers[HEADER_TIMESTAMP] = "0" + headers[HEADER_TIMESTAMP]
    elif what == "nonce_format":
        headers[HEADER_NONCE] = "short"
    elif what == "unknown_key":
        headers[HEADER_KEY_ID] = "relay-unknown"
    elif what == "key_format":
        headers[HEADER_KEY_ID] = "bad key id"
    elif what == "missing_header":
        del headers[HEADER_SIGNATURE]
    return body, headers, path


@pytest.mark.parametrize(
    "what",
    [
        "body",
        "path",
        "nonce",
        "signature",
        "signature_format",
        "timestamp_format",
        "nonce_format",
        "unknown_key",
        "key_format",
        "missing_header",
    ],
)
async def test_every_signature_problem_gets_the_same_uniform_refusal(served: Served, what: str) -> None:
    body, headers, path = tampered(served, what)
    response = await served.relay.post_raw(body, headers=headers, path=path)
    assert response.status_code == 401
    assert response.content == UNAUTHORIZED
    assert set(response.headers) == {"content-type", "content-length", "date", "server"}
    assert await audit_count(served) == 0


async def test_a_tampered_method_is_refused(served: Served) -> None:
    body = batch_body([fact()])
    headers = served.relay.sign(body)
    response = await served.relay.http.put("/internal/v1/audit-events:batch", content=body, headers=headers)
    assert response.status_code == 405  # no other method is routed at all
    assert await audit_count(served) == 0
