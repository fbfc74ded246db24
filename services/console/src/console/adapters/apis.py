"""HTTP clients of the five services' public APIs, acting with the signed-in user's identity.

Every call carries the signed-in user's own access token (one token of the OpenID provider, for the five
services' audiences), so each service, Sense included, sees and audits the user who acts; the console holds
no credential of its own. Tokens live only in request headers: never in a page, a log or a URL.
An error answer becomes :class:`ApiError` with the service's stable ``code`` and field names, never its
input values.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from console.domain.alerts import Alert, alerts_of
from console.domain.identity import User
from console.service_layer.ports import ApiError, Json, Readiness, StreamedOutput

SENSE, ORPHANS, BELL, SIGNAL, MEDIA = (
    "sense-reconciler", "orphan-scanner", "bell-receiver", "signal-watcher", "media-worker"
)  # fmt: skip
PROMETHEUS = "prometheus"  # in `urls` when configured; only `raw` reads it (no user token goes there)


@dataclass
class Apis:
    urls: Mapping[str, str]
    timeout_seconds: float = 10.0
    _http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(
            timeout=self.timeout_seconds, limits=httpx.Limits(max_connections=100), follow_redirects=False
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @staticmethod
    def _headers(user: User | None) -> dict[str, str]:
        return {} if user is None else {"Authorization": f"Bearer {user.token}"}

    async def call(
        self,
        service: str,
        method: str,
        path: str,
        user: User | None,
        *,
        params: Any = None,
        json: Any = None,
        content: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The JSON answer (None for 204); ApiError for any 4xx/5xx; ApiError(503, unavailable) when the
        service does not answer."""
        try:
            response = await self._http.request(
                method,
                self.urls[service] + path,
                params=params,
                json=json,
                content=content,
                headers={**self._headers(user), **(headers or {})},
            )
        except httpx.HTTPError:
            raise ApiError(service, 503, "service_unavailable") from None
        if response.status_code >= 400:
            raise _error(service, response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    async def get(self, service: str, path: str, user: User | None, **params: Any) -> Any:
        clean = {k: v for k, v in params.items() if v not in (None, "")}
        return await self.call(service, "GET", path, user, params=clean)

    async def raw(self, service: str, path: str) -> httpx.Response | None:
        """An unauthenticated GET (``/readyz``, ``/metrics``); None when the service does not answer."""
        try:
            return await self._http.get(self.urls[service] + path, timeout=3.0)
        except httpx.HTTPError:
            return None

    async def stream(
        self, service: str, path: str, user: User, headers: Mapping[str, str]
    ) -> tuple[httpx.Response, AsyncIterator[bytes]]:
        """A streamed GET (media outputs, Range passed through); the caller closes the response."""
        request = self._http.build_request(
            "GET", self.urls[service] + path, headers={**self._headers(user), **headers}
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError:
            raise ApiError(service, 503, "service_unavailable") from None
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise _error(service, response)
        return response, response.aiter_bytes()


def _error(service: str, response: httpx.Response) -> ApiError:
    code: str = "error"
    fields: tuple[str, ...] = ()
    try:
        body = response.json()
        if isinstance(body, dict):
            code = str(body.get("code") or body.get("error") or code)
            raw_fields = body.get("fields") or ()
            fields = tuple(str(f) for f in raw_fields if isinstance(f, str))
    except ValueError:
        pass
    return ApiError(service, response.status_code, code, fields)


# --- the ports' adapters: one per API, over the shared client ------------------------------------------


@dataclass(frozen=True)
class SenseReconcilerApi:
    """The `SenseReconcilerPort` over sense-reconciler's API."""

    apis: Apis

    async def devices(
        self, user: User, *, tenant_id: str | None, site_id: str | None, after: str | None, limit: int
    ) -> Json:
        return await self.apis.get(
            SENSE, "/v1/devices", user, tenant_id=tenant_id, site_id=site_id, after=after, limit=limit
        )

    async def reconcile_statuses(self, user: User, device_ids: list[str]) -> Json:
        params = [("device_id", d) for d in device_ids]
        return await self.apis.call(SENSE, "GET", "/v1/reconcile-statuses", user, params=params)

    async def device(self, user: User, device_id: uuid.UUID) -> Json:
        return await self.apis.get(SENSE, f"/v1/devices/{device_id}", user)

    async def reconcile_status(self, user: User, device_id: uuid.UUID) -> Json:
        return await self.apis.get(SENSE, f"/v1/devices/{device_id}/reconcile-status", user)

    async def create_device(self, user: User, body: Mapping[str, Any]) -> Json:
        return await self.apis.call(SENSE, "POST", "/v1/devices", user, json=dict(body))

    async def change_device(self, user: User, device_id: uuid.UUID, body: Mapping[str, str]) -> None:
        await self.apis.call(SENSE, "PATCH", f"/v1/devices/{device_id}", user, json=dict(body))

    async def set_desired_state(self, user: User, device_id: uuid.UUID, state: str) -> None:
        body = {"desired_state": state}
        await self.apis.call(SENSE, "PUT", f"/v1/devices/{device_id}/desired-state", user, json=body)

    async def set_desired_states(self, user: User, device_ids: list[str], state: str) -> None:
        body = {"items": [{"device_id": i, "desired_state": state} for i in device_ids]}
        await self.apis.call(SENSE, "POST", "/v1/devices:set-desired-state", user, json=body)

    async def site(self, user: User, tenant_id: str, site_id: str) -> Json:
        return await self.apis.get(SENSE, f"/v1/sites/{tenant_id}/{site_id}", user)

    async def set_site_limit(self, user: User, tenant_id: str, site_id: str, max_video_channels: int) -> None:
        body = {"max_video_channels": max_video_channels}
        await self.apis.call(SENSE, "PUT", f"/v1/sites/{tenant_id}/{site_id}", user, json=body)


@dataclass(frozen=True)
class OrphanScannerApi:
    """The `OrphanScannerPort` over orphan-scanner's API."""

    apis: Apis

    async def latest_report(self, user: User) -> Json | None:
        try:
            return await self.apis.get(ORPHANS, "/v1/reports/latest", user)
        except ApiError as exc:
            if exc.status != 404:
                raise
            return None


@dataclass(frozen=True)
class BellReceiverApi:
    """The `BellReceiverPort` over bell-receiver's API."""

    apis: Apis

    async def audit_events(
        self, user: User, filters: Mapping[str, str | None], *, cursor: str | None, limit: int
    ) -> Json:
        return await self.apis.get(BELL, "/v1/audit-events", user, **filters, cursor=cursor, limit=limit)

    async def notifications(self, user: User, *, cursor: str | None) -> Json:
        return await self.apis.get(BELL, "/v1/notifications", user, cursor=cursor)

    async def mark_read(self, user: User, notification_id: int, read: bool) -> None:
        method = "PUT" if read else "DELETE"
        await self.apis.call(BELL, method, f"/v1/notifications/{notification_id}/read", user)


@dataclass(frozen=True)
class SignalWatcherApi:
    """The `SignalWatcherPort` over signal-watcher's API."""

    apis: Apis

    async def watchers(self, user: User, *, limit: int, cursor: str | None) -> Json:
        return await self.apis.get(SIGNAL, "/v1/signal-watchers", user, limit=limit, cursor=cursor)

    async def all_watchers(self, user: User, *, limit: int, cursor: str | None) -> Json:
        return await self.apis.get(SIGNAL, "/v1/admin/signal-watchers", user, limit=limit, cursor=cursor)

    async def watcher(self, user: User, watcher_id: uuid.UUID) -> Json:
        return await self.apis.get(SIGNAL, f"/v1/signal-watchers/{watcher_id}", user)

    async def checks(self, user: User, watcher_id: uuid.UUID, *, limit: int, cursor: str | None) -> Json:
        path = f"/v1/signal-watchers/{watcher_id}/checks"
        return await self.apis.get(SIGNAL, path, user, limit=limit, cursor=cursor)

    async def create_watcher(self, user: User, body: Mapping[str, Any]) -> Json:
        return await self.apis.call(SIGNAL, "POST", "/v1/signal-watchers", user, json=dict(body))

    async def update_watcher(self, user: User, watcher_id: uuid.UUID, body: Mapping[str, Any]) -> None:
        await self.apis.call(SIGNAL, "PUT", f"/v1/signal-watchers/{watcher_id}", user, json=dict(body))

    async def test_definition(self, user: User, body: Mapping[str, Any], edit_of: uuid.UUID | None) -> Json:
        params = {"edit_of": str(edit_of)} if edit_of is not None else None
        return await self.apis.call(
            SIGNAL, "POST", "/v1/signal-watchers:test", user, json=dict(body), params=params
        )

    async def test_watcher(self, user: User, watcher_id: uuid.UUID) -> Json:
        return await self.apis.call(SIGNAL, "POST", f"/v1/signal-watchers/{watcher_id}/test", user)

    async def check_now(self, user: User, watcher_id: uuid.UUID) -> None:
        await self.apis.call(SIGNAL, "POST", f"/v1/signal-watchers/{watcher_id}/check", user)

    async def set_status(self, user: User, watcher_id: uuid.UUID, status: str) -> None:
        path = f"/v1/signal-watchers/{watcher_id}/status"
        await self.apis.call(SIGNAL, "POST", path, user, json={"status": status})


@dataclass(frozen=True)
class MediaWorkerApi:
    """The `MediaWorkerPort` over media-worker's API."""

    apis: Apis

    async def materials(self, user: User, *, cursor: str | None) -> Json:
        return await self.apis.get(MEDIA, "/v1/materials", user, cursor=cursor)

    async def material(self, user: User, material_id: uuid.UUID) -> Json:
        return await self.apis.get(MEDIA, f"/v1/materials/{material_id}", user)

    async def retry(self, user: User, material_id: uuid.UUID) -> None:
        await self.apis.call(MEDIA, "POST", f"/v1/materials/{material_id}/retry", user)

    async def output(
        self, user: User, material_id: uuid.UUID, kind: str, headers: Mapping[str, str]
    ) -> StreamedOutput:
        path = f"/v1/materials/{material_id}/outputs/{kind}"
        response, body = await self.apis.stream(MEDIA, path, user, headers)
        return StreamedOutput(response.status_code, response.headers, body, response.aclose)

    async def instances(self, user: User) -> Json:
        return await self.apis.get(MEDIA, "/internal/instances", user)

    async def drain(self, user: User) -> Json:
        return await self.apis.get(MEDIA, "/internal/drain", user)

    async def start_upload(self, user: User, body: Any) -> Json:
        return await self.apis.call(MEDIA, "POST", "/v1/uploads", user, json=body)

    async def put_chunk(
        self, user: User, session_id: uuid.UUID, index: int, content: AsyncIterator[bytes], length: str | None
    ) -> Json:
        headers = {"Content-Length": length} if length is not None else {}
        path = f"/v1/uploads/{session_id}/chunks/{index}"
        return await self.apis.call(MEDIA, "PUT", path, user, content=content, headers=headers)

    async def complete_upload(self, user: User, session_id: uuid.UUID) -> Json:
        return await self.apis.call(MEDIA, "POST", f"/v1/uploads/{session_id}/complete", user)


@dataclass(frozen=True)
class ServiceHealthApi:
    """The `HealthPort`: each service's `/readyz` and `/metrics`, unauthenticated."""

    apis: Apis

    async def readiness(self, service: str) -> Readiness | None:
        response = await self.apis.raw(service, "/readyz")
        if response is None:
            return None
        try:
            body = response.json()
            checks = {str(k): str(v) for k, v in body.get("checks", {}).items()}
        except ValueError:
            checks = {}
        return Readiness(response.status_code, checks)

    async def metrics(self, service: str) -> str | None:
        response = await self.apis.raw(service, "/metrics")
        return response.text if response is not None and response.status_code == 200 else None


@dataclass(frozen=True)
class PrometheusAlerts:
    """The `AlertsPort` over Prometheus's `/api/v1/alerts`, unauthenticated."""

    apis: Apis

    async def alerts(self) -> list[Alert] | None:
        response = await self.apis.raw(PROMETHEUS, "/api/v1/alerts")
        if response is None or response.status_code != 200:
            return None
        try:
            return alerts_of(response.json())
        except ValueError:
            return None
