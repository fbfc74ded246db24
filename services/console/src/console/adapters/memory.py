"""The fakes of the console's ports (`console.service_layer.ports`): in memory, answering as the services
answer the calls the console makes (their JSON, their refusal codes), for the console's tests and benches.
Each passes its port's contract suite (`tests/ports/console/`) as the real adapter does. They do not check
the user's permissions (the services do; the console only hides what the user could not use)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from console.domain.alerts import Alert
from console.domain.identity import User
from console.domain.waterfall import Trace
from console.service_layer.ports import ApiError, Json, Readiness, StreamedOutput

SITE_DEFAULT_CHANNELS = 16
MEDIA_SERVER = "mtx-a"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _page(items: list[Any], cursor: str | None, limit: int, key: str = "next_cursor") -> dict[str, Any]:
    """`limit` items from the position `cursor` names (an index here), and the cursor of the next page."""
    start = int(cursor) if cursor and cursor.isdigit() else 0
    chosen = items[start : start + limit]
    following = str(start + limit) if start + limit < len(items) else None
    return {"items": chosen, key: following}


@dataclass
class MemorySenseReconciler:
    """sense-reconciler: devices, their reconcile status (converged at once), site limits."""

    devices_by_id: dict[str, dict[str, Any]] = field(default_factory=dict)
    limits: dict[tuple[str, str], int] = field(default_factory=dict)

    def _known(self, device_id: uuid.UUID | str) -> dict[str, Any]:
        found = self.devices_by_id.get(str(device_id))
        if found is None:
            raise ApiError("sense-reconciler", 404, "device_not_found")
        return found

    def _changed(self, device: dict[str, Any], **changes: Any) -> None:
        device.update(changes, config_version=device["config_version"] + 1, updated_at=_now())

    async def devices(
        self, user: User, *, tenant_id: str | None, site_id: str | None, after: str | None, limit: int
    ) -> Json:
        found = sorted(
            (
                d
                for d in self.devices_by_id.values()
                if tenant_id in (None, d["tenant_id"])
                and site_id in (None, d["site_id"])
                and (after is None or d["id"] > after)
            ),
            key=lambda d: d["id"],
        )
        page = found[:limit]
        return {"items": page, "next_after": page[-1]["id"] if len(found) > limit else None}

    async def reconcile_statuses(self, user: User, device_ids: list[str]) -> Json:
        return {"items": [self._status(d) for d in device_ids if d in self.devices_by_id]}

    def _status(self, device_id: str) -> dict[str, Any]:
        device = self._known(device_id)
        return {
            "device_id": device_id,
            "desired_generation": device["config_version"],
            "observed_generation": device["config_version"],
            "status": "converged",
            "attempts": 1,
            "next_attempt_at": None,
            "last_error_code": None,
            "last_error_reason": None,
            "last_result_at": device["updated_at"],
            "partition": 0,
            "media_server_id": device["media_server_id"],
        }

    async def device(self, user: User, device_id: uuid.UUID) -> Json:
        return dict(self._known(device_id))

    async def reconcile_status(self, user: User, device_id: uuid.UUID) -> Json:
        return self._status(str(device_id))

    async def create_device(self, user: User, body: Mapping[str, Any]) -> Json:
        if any(d["path_name"] == body["path_name"] for d in self.devices_by_id.values()):
            raise ApiError("sense-reconciler", 409, "path_name_taken")
        now = _now()
        device = {
            "id": str(uuid.uuid4()),
            **{k: body[k] for k in ("tenant_id", "site_id", "name", "path_name", "desired_state")},
            "media_server_id": MEDIA_SERVER,
            "config_version": 1,
            "created_at": now,
            "updated_at": now,
        }
        self.devices_by_id[device["id"]] = device
        return dict(device)

    async def change_device(self, user: User, device_id: uuid.UUID, body: Mapping[str, str]) -> None:
        device = self._known(device_id)
        self._changed(device, **{k: v for k, v in body.items() if k == "name"})

    async def set_desired_state(self, user: User, device_id: uuid.UUID, state: str) -> None:
        self._changed(self._known(device_id), desired_state=state)

    async def set_desired_states(self, user: User, device_ids: list[str], state: str) -> None:
        chosen = [self._known(d) for d in device_ids]  # all or nothing
        for device in chosen:
            self._changed(device, desired_state=state)

    async def site(self, user: User, tenant_id: str, site_id: str) -> Json:
        enabled = sum(
            1
            for d in self.devices_by_id.values()
            if (d["tenant_id"], d["site_id"]) == (tenant_id, site_id) and d["desired_state"] == "enabled"
        )
        return {
            "tenant_id": tenant_id,
            "site_id": site_id,
            "max_video_channels": self.limits.get((tenant_id, site_id), SITE_DEFAULT_CHANNELS),
            "media_server_id": MEDIA_SERVER,
            "enabled_devices": enabled,
        }

    async def set_site_limit(self, user: User, tenant_id: str, site_id: str, max_video_channels: int) -> None:
        self.limits[(tenant_id, site_id)] = max_video_channels


@dataclass
class MemoryOrphanScanner:
    """orphan-scanner: `report` is its latest report (None before the first scan)."""

    report: dict[str, Any] | None = None

    async def latest_report(self, user: User) -> Json | None:
        return self.report


@dataclass
class MemoryBellReceiver:
    """bell-receiver: `audit` rows (newest first) and each user's notifications (by subject)."""

    audit: list[dict[str, Any]] = field(default_factory=list)
    inbox: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    async def audit_events(
        self, user: User, filters: Mapping[str, str | None], *, cursor: str | None, limit: int
    ) -> Json:
        for moment in ("occurred_from", "occurred_before"):
            value = filters.get(moment)
            if value:
                try:
                    datetime.fromisoformat(value)
                except ValueError:
                    raise ApiError("bell-receiver", 422, "validation_error", (moment,)) from None
        rows = [
            row
            for row in self.audit
            if all(not v or k.startswith("occurred_") or str(row.get(k)) == v for k, v in filters.items())
        ]
        return _page(rows, cursor, limit)

    async def notifications(self, user: User, *, cursor: str | None) -> Json:
        return _page(self.inbox.get(user.subject, []), cursor, 50)

    async def mark_read(self, user: User, notification_id: int, read: bool) -> None:
        for notification in self.inbox.get(user.subject, []):
            if notification["id"] == notification_id:
                notification["read_at"] = _now() if read else None
                return
        raise ApiError("bell-receiver", 404, "not_found")


@dataclass
class MemorySignalWatcher:
    """signal-watcher: watchers (by owner), their checks (newest first), the form's test."""

    watchers_by_id: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks_by_id: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    checks_requested: list[str] = field(default_factory=list)
    test_result: dict[str, Any] = field(default_factory=lambda: {"ok": True})

    def _owned(self, user: User, watcher_id: uuid.UUID | str) -> dict[str, Any]:
        found = self.watchers_by_id.get(str(watcher_id))
        if found is None or found["owner"] != user.subject:
            raise ApiError("signal-watcher", 404, "not_found")
        return found

    async def watchers(self, user: User, *, limit: int, cursor: str | None) -> Json:
        mine = [w for w in self.watchers_by_id.values() if w["owner"] == user.subject]
        return _page(mine, cursor, limit)

    async def all_watchers(self, user: User, *, limit: int, cursor: str | None) -> Json:
        return _page(list(self.watchers_by_id.values()), cursor, limit)

    async def watcher(self, user: User, watcher_id: uuid.UUID) -> Json:
        return dict(self._owned(user, watcher_id))

    async def checks(self, user: User, watcher_id: uuid.UUID, *, limit: int, cursor: str | None) -> Json:
        self._owned(user, watcher_id)
        return _page(self.checks_by_id.get(str(watcher_id), []), cursor, limit)

    async def create_watcher(self, user: User, body: Mapping[str, Any]) -> Json:
        watcher_id = str(uuid.uuid4())
        headers = [{"key": h["key"], "value": "********"} for h in body.get("headers", [])]
        self.watchers_by_id[watcher_id] = {
            **body, "id": watcher_id, "owner": user.subject, "status": "ACTIVE", "headers": headers,
        }  # fmt: skip
        self.checks_by_id[watcher_id] = []
        return dict(self.watchers_by_id[watcher_id])

    async def update_watcher(self, user: User, watcher_id: uuid.UUID, body: Mapping[str, Any]) -> None:
        watcher = self._owned(user, watcher_id)
        watcher.update({k: v for k, v in body.items() if k != "headers"})

    async def test_definition(self, user: User, body: Mapping[str, Any], edit_of: uuid.UUID | None) -> Json:
        if edit_of is not None:
            self._owned(user, edit_of)
        return dict(self.test_result)

    async def test_watcher(self, user: User, watcher_id: uuid.UUID) -> Json:
        self._owned(user, watcher_id)
        return dict(self.test_result)

    async def check_now(self, user: User, watcher_id: uuid.UUID) -> None:
        self._owned(user, watcher_id)
        self.checks_requested.append(str(watcher_id))

    async def set_status(self, user: User, watcher_id: uuid.UUID, status: str) -> None:
        self._owned(user, watcher_id)["status"] = status


@dataclass
class MemoryMediaWorker:
    """media-worker: materials (by owner), their outputs' bytes, uploads, the drain table."""

    materials_by_id: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    uploads: dict[str, dict[str, Any]] = field(default_factory=dict)
    instances_table: list[dict[str, Any]] = field(default_factory=list)
    draining: dict[str, Any] | None = None

    def _owned(self, user: User, material_id: uuid.UUID | str) -> dict[str, Any]:
        found = self.materials_by_id.get(str(material_id))
        if found is None or found["owner"] != user.subject:
            raise ApiError("media-worker", 404, "not_found")
        return found

    async def materials(self, user: User, *, cursor: str | None) -> Json:
        mine = [m for m in self.materials_by_id.values() if m["owner"] == user.subject]
        return _page(mine, cursor, 50)

    async def material(self, user: User, material_id: uuid.UUID) -> Json:
        return dict(self._owned(user, material_id))

    async def retry(self, user: User, material_id: uuid.UUID) -> None:
        material = self._owned(user, material_id)
        if material["status"] != "failed":
            raise ApiError("media-worker", 409, "not_retryable")
        material["status"] = "pending"

    async def output(
        self, user: User, material_id: uuid.UUID, kind: str, headers: Mapping[str, str]
    ) -> StreamedOutput:
        self._owned(user, material_id)
        data = self.outputs.get((str(material_id), kind))
        if data is None:
            raise ApiError("media-worker", 404, "not_found")

        async def body() -> AsyncIterator[bytes]:
            yield data

        async def close() -> None:
            return None

        answer = {"content-type": "application/octet-stream", "content-length": str(len(data))}
        return StreamedOutput(200, answer, body(), close)

    async def instances(self, user: User) -> Json:
        return {"items": list(self.instances_table)}

    async def drain(self, user: User) -> Json:
        if self.draining is None:
            raise ApiError("media-worker", 404, "not_found")
        return self.draining

    async def start_upload(self, user: User, body: Any) -> Json:
        session_id = str(uuid.uuid4())
        self.uploads[session_id] = {"owner": user.subject, "body": body, "chunks": {}}
        return {"session_id": session_id}

    async def put_chunk(
        self, user: User, session_id: uuid.UUID, index: int, content: AsyncIterator[bytes], length: str | None
    ) -> Json:
        upload = self.uploads.get(str(session_id))
        if upload is None or upload["owner"] != user.subject:
            raise ApiError("media-worker", 404, "not_found")
        upload["chunks"][index] = b"".join([chunk async for chunk in content])
        return {"index": index, "received": len(upload["chunks"][index])}

    async def complete_upload(self, user: User, session_id: uuid.UUID) -> Json:
        upload = self.uploads.pop(str(session_id), None)
        if upload is None or upload["owner"] != user.subject:
            raise ApiError("media-worker", 404, "not_found")
        material_id = str(uuid.uuid4())
        self.materials_by_id[material_id] = {"id": material_id, "owner": user.subject, "status": "pending"}
        return {"material_id": material_id}


@dataclass
class MemoryHealth:
    """Every service's readiness and metrics page; a service not in `ready` does not answer."""

    ready: dict[str, Readiness] = field(default_factory=dict)
    pages: dict[str, str] = field(default_factory=dict)

    async def readiness(self, service: str) -> Readiness | None:
        return self.ready.get(service)

    async def metrics(self, service: str) -> str | None:
        return self.pages.get(service) if service in self.ready else None


@dataclass
class MemoryAlerts:
    """Prometheus's alerts; `answering` False: it does not answer."""

    found: list[Alert] = field(default_factory=list)
    answering: bool = True

    async def alerts(self) -> list[Alert] | None:
        return sorted(self.found, key=Alert.order) if self.answering else None


@dataclass
class MemoryTraceStore:
    """Stored traces by id; a search finds those with a span of the service carrying every attribute."""

    traces: dict[str, Trace] = field(default_factory=dict)

    async def trace(self, trace_id: str) -> Trace | None:
        return self.traces.get(trace_id)

    async def search(self, service: str, attributes: Mapping[str, str]) -> list[Trace]:
        wanted = set(attributes.items())
        return [
            trace
            for trace in self.traces.values()
            if any(s.service == service and wanted <= set(s.attributes) for s in trace.spans)
        ]
