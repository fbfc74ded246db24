"""The signed request the client sends: verifiable by Bell's rules over the exact body, a fresh nonce per
attempt, no key in it, redirects not followed, transport trouble reported as a batch failure code."""

from __future__ import annotations

import json
import secrets
import uuid
from datetime import UTC, datetime

import httpx

from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.domain.audit_facts import OutboxFact
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.audit_push_outcome import BatchFailure, ItemResults, PushFailureCode
from yovision_platform.audit_push import BATCH_PATH
from yovision_platform.security import HEADER_NONCE, HEADER_TIMESTAMP, KeyRing, SigningKey, verify_request

NOW = 1_790_000_000.0
KEY = secrets.token_bytes(32)
RING = KeyRing([SigningKey("sense-1", KEY)], active_key_id="sense-1")


def facts(n: int) -> list[OutboxFact]:
    return [
        OutboxFact(
            row_id=i,
            event_id=uuid.uuid4(),
            fact_version=1,
            action="device.created",
            actor="operator:alice",
            device_id=uuid.uuid4(),
            tenant_id="tenant-a",
            site_id="site-1",
            changed_fields=("name",),
            config_version=1,
            occurred_at=datetime(2026, 11, 30, tzinfo=UTC),
        )
        for i in range(n)
    ]


def client(handler: httpx.MockTransport) -> BellClient:
    return BellClient(AuditPushConfig("https://bell.internal", RING), clock=lambda: NOW, transport=handler)


async def test_the_request_is_signed_over_the_exact_body_with_a_fresh_nonce_each_time() -> None:
    seen: list[httpx.Request] = []

    def accept(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        items = json.loads(request.content)["items"]
        results = [
            {"index": i, "status": "accepted", "event_id": item["event_id"], "code": None}
            for i, item in enumerate(items)
        ]
        return httpx.Response(200, json={"contract": "sense-audit-relay-v1", "results": results})

    batch = facts(2)
    async with client(httpx.MockTransport(accept)) as bell:
        assert isinstance(await bell.send(batch), ItemResults)
        assert isinstance(await bell.send(batch), ItemResults)
    for request in seen:
        assert request.method == "POST" and request.url.raw_path.decode() == BATCH_PATH
        assert request.headers[HEADER_TIMESTAMP] == str(int(NOW))
        verify_request(
            RING,
            method="POST",
            path=BATCH_PATH,
            headers=request.headers.items(),
            body=request.content,
            now=NOW,
        )
        assert KEY.hex() not in request.content.decode() and KEY.hex() not in str(request.headers)
    assert seen[0].headers[HEADER_NONCE] != seen[1].headers[HEADER_NONCE]
    assert seen[0].content == seen[1].content


async def test_a_redirect_is_not_followed() -> None:
    def redirect(request: httpx.Request) -> httpx.Response:
        return httpx.Response(307, headers={"location": "https://elsewhere.example/"})

    async with client(httpx.MockTransport(redirect)) as bell:
        assert await bell.send(facts(1)) == BatchFailure(PushFailureCode.REQUEST_REFUSED)


async def test_transport_errors_become_batch_failure_codes() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused")

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow")

    async with client(httpx.MockTransport(refuse)) as bell:
        assert await bell.send(facts(1)) == BatchFailure(PushFailureCode.NETWORK_ERROR)
    async with client(httpx.MockTransport(slow)) as bell:
        assert await bell.send(facts(1)) == BatchFailure(PushFailureCode.TIMEOUT)


async def test_an_oversized_answer_is_malformed() -> None:
    def huge(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b" " * (1024 * 1024 + 1))

    async with client(httpx.MockTransport(huge)) as bell:
        assert await bell.send(facts(1)) == BatchFailure(PushFailureCode.MALFORMED_RESPONSE)
