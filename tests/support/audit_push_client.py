"""A small signed client for Bell's relay endpoint, as the Sense relay worker will call it (tests only).

It signs exactly what it sends with yovision_platform.security; `now`, `nonce`, `path` and the raw body can
be overridden to build tampered, stale and replayed requests.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from yovision_platform.audit_push import BATCH_PATH
from yovision_platform.security import KeyRing, sign_request


def fact(schema_version: int = 1, **overrides: Any) -> dict[str, Any]:
    """A valid device-audit fact (format 1 or 2) with a fresh event id."""
    item: dict[str, Any] = {
        "schema_version": schema_version,
        "event_id": str(uuid.uuid4()),
        "occurred_at": "2026-11-30T01:02:03.456789Z",
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "device_id": "dev-0001",
        "action": "device.config_changed",
        "actor": "operator:alice",
        "changed_fields": ["name", "source_uri"],
    }
    if schema_version == 2:
        item |= {"config_version": 7, "correlation_id": "req-42"}
    return item | overrides


def kafka_fields_of(relayed: Mapping[str, Any]) -> dict[str, Any]:
    """The DeviceAuditRecorded fields (no envelope) carrying the same fact as `relayed` (format 2)."""
    return {
        "action": relayed["action"],
        "actor": relayed["actor"],
        "device_id": relayed["device_id"],
        "tenant_id": relayed["tenant_id"],
        "site_id": relayed["site_id"],
        "changed_fields": relayed["changed_fields"],
        "config_version": relayed["config_version"],
        "fact_version": 2,
    }


def batch_body(items: Sequence[object]) -> bytes:
    return json.dumps({"items": list(items)}).encode()


class RelayClient:
    def __init__(self, http: httpx.AsyncClient, keyring: KeyRing) -> None:
        self.http = http
        self.keyring = keyring

    def sign(
        self, body: bytes, *, now: float | None = None, nonce: str | None = None, path: str = BATCH_PATH
    ) -> dict[str, str]:
        moment = time.time() if now is None else now
        return sign_request(self.keyring, method="POST", path=path, body=body, now=moment, nonce=nonce)

    async def post_raw(
        self,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        path: str = BATCH_PATH,
        now: float | None = None,
        nonce: str | None = None,
    ) -> httpx.Response:
        signed = dict(headers) if headers is not None else self.sign(body, now=now, nonce=nonce, path=path)
        return await self.http.post(
            path, content=body, headers={**signed, "content-type": "application/json"}
        )

    async def post_items(self, items: Sequence[object], **kwargs: Any) -> httpx.Response:
        return await self.post_raw(batch_body(items), **kwargs)
