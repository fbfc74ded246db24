"""The records the use cases and their stores exchange (service_layer.ports): devices, sites, a stored
source URI, a device-audit fact and a device's reconcile state. Plain values, no I/O."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = ["AuditFact", "DeviceRow", "DeviceUpdate", "NewDevice", "ReconcileState", "SiteRow", "StoredSource"]


@dataclass(frozen=True)
class DeviceRow:
    """A device as the API shows it: never its source URI."""

    id: uuid.UUID
    tenant_id: str
    site_id: str
    name: str
    path_name: str
    media_server_id: str
    desired_state: str
    config_version: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class DeviceUpdate:
    """A new config version of a device: a new source replaces any stored form of the old one (None keeps
    it); `media_server_id` None keeps the server."""

    name: str
    source_uri_ciphertext: bytes | None
    desired_state: str
    media_server_id: str | None = None


@dataclass(frozen=True)
class NewDevice:
    """A device to register (config version 1); its source URI already sealed. A secret: never log it."""

    id: uuid.UUID
    tenant_id: str
    site_id: str
    name: str
    path_name: str
    source_uri_ciphertext: bytes
    desired_state: str
    media_server_id: str

    def __repr__(self) -> str:
        return f"NewDevice(id={self.id}, source_uri_ciphertext=<redacted>)"


@dataclass(frozen=True)
class SiteRow:
    tenant_id: str
    site_id: str
    max_video_channels: int
    media_server_id: str


@dataclass(frozen=True)
class StoredSource:
    """A device's source URI as stored: the ciphertext, or cleartext from before encryption (migration
    0007). A secret: never log it."""

    ciphertext: bytes | None
    plaintext: str | None

    def __repr__(self) -> str:
        return "StoredSource(<redacted>)"


@dataclass(frozen=True)
class AuditFact:
    """A device-audit fact to record (the outbox Bell's push reads): what happened to `device`."""

    event_id: uuid.UUID
    action: str
    actor: str
    device: DeviceRow
    changed_fields: Sequence[str]
    fact_version: int = 2


@dataclass(frozen=True)
class ReconcileState:
    """How far the reconciler got with a device (its `reconcile_state` row, lease columns left out)."""

    device_id: uuid.UUID
    desired_generation: int
    observed_generation: int
    status: str
    attempts: int
    next_attempt_at: datetime | None  # None: refused, not retried until the device changes
    last_error_code: str | None
    last_error_reason: str | None  # MediaMTX's reason for a refusal, redacted
    last_result_at: datetime | None
    partition: int
    media_server_id: str
