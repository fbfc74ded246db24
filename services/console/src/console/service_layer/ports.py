"""The console's ports: one per API it calls. Every method acts with the signed-in user's identity (`user`)
and answers the service's JSON as is (the pages render it); a refusal is `ApiError` with the service's
stable ``code`` (below), a service that does not answer ``ApiError(503,
service_unavailable)``. The real adapters are in `console.adapters.apis` (the five services and their health),
`console.adapters.jaeger` (the trace store) and `console.adapters.prometheus` (alerts); the fakes in
`console.adapters.memory`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from console.domain.alerts import Alert
from console.domain.identity import User
from console.domain.sign_in import AuthorizationRequest, TokenAnswer
from console.domain.waterfall import Trace

Json = Any  # a service's JSON answer, rendered by the pages as it is


class ApiError(Exception):
    """A service's refusal or absence: its name, the HTTP status, its stable ``code`` and the names of the
    fields it refused. A plain exception (not a frozen dataclass): Starlette clears ``__traceback__`` on
    every exception its handlers answered, and a frozen instance refuses that assignment."""

    def __init__(self, service: str, status: int, code: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(service, status, code, fields)
        self.service = service
        self.status = status
        self.code = code
        self.fields = fields

    def __str__(self) -> str:
        return f"{self.service}: {self.status} {self.code}"


class SenseReconcilerPort(Protocol):
    """sense-reconciler: devices, their reconcile status, site limits."""

    async def devices(
        self, user: User, *, tenant_id: str | None, site_id: str | None, after: str | None, limit: int
    ) -> Json: ...
    async def reconcile_statuses(self, user: User, device_ids: list[str]) -> Json: ...
    async def device(self, user: User, device_id: uuid.UUID) -> Json: ...
    async def reconcile_status(self, user: User, device_id: uuid.UUID) -> Json: ...
    async def create_device(self, user: User, body: Mapping[str, Any]) -> Json: ...
    async def change_device(self, user: User, device_id: uuid.UUID, body: Mapping[str, str]) -> None: ...
    async def set_desired_state(self, user: User, device_id: uuid.UUID, state: str) -> None: ...
    async def set_desired_states(self, user: User, device_ids: list[str], state: str) -> None: ...
    async def site(self, user: User, tenant_id: str, site_id: str) -> Json: ...
    async def set_site_limit(
        self, user: User, tenant_id: str, site_id: str, max_video_channels: int
    ) -> None: ...


class OrphanScannerPort(Protocol):
    """orphan-scanner, read-only: its latest report."""

    async def latest_report(self, user: User) -> Json | None:
        """The latest report, None before the first scan."""


class BellReceiverPort(Protocol):
    """bell-receiver: the audit trail and the user's inbox."""

    async def audit_events(
        self, user: User, filters: Mapping[str, str | None], *, cursor: str | None, limit: int
    ) -> Json: ...
    async def notifications(self, user: User, *, cursor: str | None) -> Json: ...
    async def mark_read(self, user: User, notification_id: int, read: bool) -> None: ...


class SignalWatcherPort(Protocol):
    """signal-watcher: the user's watchers (all of them for an admin), their checks, the form's test."""

    async def watchers(self, user: User, *, limit: int, cursor: str | None) -> Json: ...
    async def all_watchers(self, user: User, *, limit: int, cursor: str | None) -> Json: ...
    async def watcher(self, user: User, watcher_id: uuid.UUID) -> Json: ...
    async def checks(self, user: User, watcher_id: uuid.UUID, *, limit: int, cursor: str | None) -> Json: ...
    async def create_watcher(self, user: User, body: Mapping[str, Any]) -> Json: ...
    async def update_watcher(self, user: User, watcher_id: uuid.UUID, body: Mapping[str, Any]) -> None: ...
    async def test_definition(
        self, user: User, body: Mapping[str, Any], edit_of: uuid.UUID | None
    ) -> Json: ...
    async def test_watcher(self, user: User, watcher_id: uuid.UUID) -> Json: ...
    async def check_now(self, user: User, watcher_id: uuid.UUID) -> None: ...
    async def set_status(self, user: User, watcher_id: uuid.UUID, status: str) -> None: ...


@dataclass(frozen=True)
class StreamedOutput:
    """A streamed material output: the upstream status and headers, its bytes, and `close` (once sent)."""

    status: int
    headers: Mapping[str, str]
    body: AsyncIterator[bytes]
    close: Any  # () -> Awaitable[None]


class MediaWorkerPort(Protocol):
    """media-worker: materials, their outputs (streamed), the upload proxy and the drain table."""

    async def materials(self, user: User, *, cursor: str | None) -> Json: ...
    async def material(self, user: User, material_id: uuid.UUID) -> Json: ...
    async def retry(self, user: User, material_id: uuid.UUID) -> None: ...
    async def output(
        self, user: User, material_id: uuid.UUID, kind: str, headers: Mapping[str, str]
    ) -> StreamedOutput: ...
    async def instances(self, user: User) -> Json: ...
    async def drain(self, user: User) -> Json: ...
    async def start_upload(self, user: User, body: Any) -> Json: ...
    async def put_chunk(
        self, user: User, session_id: uuid.UUID, index: int, content: AsyncIterator[bytes], length: str | None
    ) -> Json: ...
    async def complete_upload(self, user: User, session_id: uuid.UUID) -> Json: ...


@dataclass(frozen=True)
class Readiness:
    status: int
    checks: Mapping[str, str]


class HealthPort(Protocol):
    """Every service's unauthenticated `/readyz` and `/metrics` (no user token)."""

    async def readiness(self, service: str) -> Readiness | None:
        """Its readiness answer, None when it does not answer."""

    async def metrics(self, service: str) -> str | None:
        """Its metrics page, None when it does not answer with one."""


class AlertsPort(Protocol):
    """Prometheus's alerts (no user token)."""

    async def alerts(self) -> list[Alert] | None:
        """Its firing and pending alerts; None when it does not answer with an alerts list."""


class TraceStore(Protocol):
    """The trace store (Jaeger's query API, no user token). Failures are `TracesUnavailable`."""

    async def trace(self, trace_id: str) -> Trace | None:
        """The trace (`trace_id` already validated), None when the store has none of that id."""

    async def search(self, service: str, attributes: Mapping[str, str]) -> list[Trace]:
        """The newest traces with a span of `service` carrying every one of `attributes`."""


class ProviderUnavailable(Exception):
    """The provider did not answer, answered 5xx, or answered something that is no valid answer."""


class GrantRefused(Exception):
    """The provider refused the grant (a code, a refresh token): `code` is its OAuth 2.0 error code when
    that is a known one, else `refused`."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class IdTokenInvalid(Exception):
    """The ID token failed a check (`console.adapters.openid` lists the checks)."""


class Provider(Protocol):
    """What sign-in needs of the provider (`console.adapters.openid.OpenIdProvider`)."""

    async def authorization_url(self, request: AuthorizationRequest) -> str:
        """The provider's URL to send the browser to, for `request`'s sign-in."""

    async def exchange_code(self, code: str, *, redirect_uri: str, verifier: str) -> TokenAnswer: ...

    async def verify_id_token(self, id_token: str, *, nonce: str) -> dict[str, object]: ...

    async def refresh(self, refresh_token: str) -> TokenAnswer: ...

    async def revoke(self, refresh_token: str) -> bool: ...

    async def end_session_url(
        self, *, id_token_hint: str, post_logout_redirect_uri: str, state: str
    ) -> str | None: ...
