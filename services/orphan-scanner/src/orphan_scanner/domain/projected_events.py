"""The Sense event types orphan-scanner's projection reads (contract: schemas/avro/catalog.json). Pure."""

from __future__ import annotations

__all__ = ["DEVICE_EVENT_TYPE", "DEVICE_EVENT_TYPES", "OWNERSHIP_EVENT_TYPE", "PROJECTED_EVENT_TYPES"]

DEVICE_EVENT_TYPE = "DeviceRegistered"  # names the device topic (every device event shares it)
DEVICE_EVENT_TYPES = frozenset({DEVICE_EVENT_TYPE, "DeviceConfigChanged", "DeviceDesiredStateChanged"})
OWNERSHIP_EVENT_TYPE = "PathOwnershipRecorded"
PROJECTED_EVENT_TYPES = DEVICE_EVENT_TYPES | {OWNERSHIP_EVENT_TYPE}
