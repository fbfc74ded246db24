"""Control API v1: devices, desired state (single and batch), reconcile status, sites (limit, server).

Every route takes the caller's access token from the OpenID provider (`Authorization: Bearer <token>`,
`AccessTokenCaller`: a JWT for the audience `sense-reconciler`, verified against the issuer's JWKS). A
missing or invalid token answers 401 `unauthorized`, always with the same body.

- **Permissions** (`authorize`, the one place they are checked): a change needs `sense:operate`; a read needs
  `sense:read`, or `sense:operate` (an operator reads what they change). Without it: 403 `forbidden`, its
  `detail` naming the permission.
- **The audit actor** of every change is the verified token's subject (`sub`: the user, or for a
  `client_credentials` token the machine client's id), carried unchanged into the device-audit fact and its
  event. A request that still carries an `X-Actor` header is refused with the same 401 as a bad credential,
  before any work (`refuse_actor_header`): no header names the actor any more.

Errors are the platform's problem details (`code`, see yovision_platform.web); request validation errors
name the fields only, never the input, so a source URI sent in a bad request is not echoed. Source URIs are
accepted, never returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from sense_reconciler.bootstrap import SenseUseCases
from sense_reconciler.domain import limits, model
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.domain.records import DeviceRow, ReconcileState
from sense_reconciler.domain.source_uri import PUBLISHED_SOURCE_URI
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.sites import Sites, SiteView
from yovision_platform.mediamtx import MEDIA_SERVER_ID_PATTERN, REASON_MAX_CHARS
from yovision_platform.web import (
    JSON_INTEGER,
    AccessTokenCaller,
    AuthError,
    Forbidden,
    Identity,
    Problem,
    create_app,
)

API_TITLE = "sense-reconciler Control API"
API_VERSION = "2.0.0"
# 2.0.0: the OpenID provider's access tokens (bearerJwt) and permissions; the actor is `sub`, X-Actor refused
# 1.3.0: source URIs as MediaMTX takes them; refusals not retried; batch last-wins
# 1.2.0: every validator's pattern published; 409 media_server_not_registered

OPERATE = "sense:operate"
READ = "sense:read"
# Which granted permissions satisfy the one an operation needs: an operator reads what they change.
SATISFIED_BY: Mapping[str, frozenset[str]] = MappingProxyType(
    {OPERATE: frozenset({OPERATE}), READ: frozenset({READ, OPERATE})}
)
ACTOR_HEADER = "X-Actor"


def authorize(caller: Identity, needed: str) -> None:
    """The Control API's one permission check: the caller holds a permission that satisfies `needed`
    (`SATISFIED_BY`), else the platform's 403 `forbidden` naming `needed`."""
    if caller.permissions.isdisjoint(SATISFIED_BY[needed]):
        raise Forbidden(needed)


def refuse_actor_header(request: Request) -> None:
    """The actor is the access token's subject, never what a caller writes: a request that still sends
    `X-Actor` is refused with the uniform 401 of a bad credential, before the token is read or any work."""
    if ACTOR_HEADER in request.headers:
        raise AuthError()


State = Literal["enabled", "disabled"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _rule(pattern: str) -> dict[str, Any]:
    """A domain check (422 `invalid_<field>`, never the framework's 422) stated in the published schema."""
    return {"pattern": pattern}


ID_RULE = _rule(model.PUBLISHED_ID)
NAME_RULE = _rule(model.PUBLISHED_NAME)
SOURCE_URI_RULE = _rule(PUBLISHED_SOURCE_URI)
SOURCE_URI_DOC = (
    "Write-only secret: an RTSP(S) URL MediaMTX accepts and can pull: lower-case `rtsp://` or `rtsps://`; "
    "optional `user:password@` (both non-empty); a DNS name or a bracketed IPv6 address; a port 1..65535; "
    "a path and query of RFC 3986 characters, with `%XX` escapes for anything else (`@` as `%40`); no "
    "fragment; no `$G<digit>` or `$MTX_QUERY` (MediaMTX substitutes them); printable ASCII"
)


def _one_of_set(*fields: str) -> Callable[[dict[str, Any]], None]:
    """The service refuses a change that sets nothing (422 `invalid_body`): at least one field is given
    and not null. Each branch repeats the field's own non-null schema (generators read branches alone)."""

    def state(schema: dict[str, Any]) -> None:
        branches = []
        for name in fields:
            field = schema["properties"][name]
            non_null = [b for b in field.get("anyOf", [field]) if b.get("type") != "null"]
            branches.append({"required": [name], "properties": {name: non_null[0]}})
        schema["anyOf"] = branches

    return state


class DeviceCreate(_Strict):
    tenant_id: str = Field(max_length=limits.ID_MAX_CHARS, json_schema_extra=ID_RULE)
    site_id: str = Field(max_length=limits.ID_MAX_CHARS, json_schema_extra=ID_RULE)
    name: str = Field(max_length=limits.DEVICE_NAME_MAX_CHARS, json_schema_extra=NAME_RULE)
    path_name: str = Field(
        max_length=limits.PATH_NAME_MAX_CHARS,
        description="MediaMTX path name: letters, digits, _ . - and / between non-empty segments "
        "(e.g. site-1/cam-07); no . or .. segments; not all or all_others",
        json_schema_extra=_rule(model.PUBLISHED_PATH_NAME),
    )
    source_uri: str = Field(
        max_length=limits.SOURCE_URI_MAX_CHARS, description=SOURCE_URI_DOC, json_schema_extra=SOURCE_URI_RULE
    )
    desired_state: State = "disabled"


class DeviceConfigChange(_Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_of_set("name", "source_uri"))

    name: str | None = Field(
        default=None, max_length=limits.DEVICE_NAME_MAX_CHARS, json_schema_extra=NAME_RULE
    )
    source_uri: str | None = Field(
        default=None,
        max_length=limits.SOURCE_URI_MAX_CHARS,
        description=SOURCE_URI_DOC,
        json_schema_extra=SOURCE_URI_RULE,
    )


class DesiredStateChange(_Strict):
    desired_state: State


class DesiredStateItem(_Strict):
    device_id: uuid.UUID
    desired_state: State


class DesiredStateBatch(_Strict):
    items: list[DesiredStateItem] = Field(
        min_length=1,
        max_length=limits.SET_DESIRED_STATE_BATCH_MAX_ITEMS,
        description="Applied in order as one change: a device listed more than once takes the state of its "
        "last item (and changes at most once).",
    )


MediaServerId = Annotated[str, Field(pattern=f"^{MEDIA_SERVER_ID_PATTERN.pattern}$", max_length=32)]


class SiteChange(_Strict):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra=_one_of_set("max_video_channels", "media_server_id")
    )

    max_video_channels: (
        Annotated[
            int,
            Field(ge=limits.SITE_MAX_VIDEO_CHANNELS_MIN, le=limits.SITE_MAX_VIDEO_CHANNELS_MAX),
            JSON_INTEGER,
        ]
        | None
    ) = None
    media_server_id: MediaServerId | None = Field(
        default=None,
        description="move the site to this registered MediaMTX server: every device's path is created "
        "there, then deleted on the old server",
    )


class Site(BaseModel):
    tenant_id: str
    site_id: str
    max_video_channels: int
    media_server_id: str
    enabled_devices: int

    @classmethod
    def of(cls, view: SiteView) -> Site:
        return cls.model_validate(view, from_attributes=True)


class Device(BaseModel):
    id: uuid.UUID
    tenant_id: str
    site_id: str
    name: str
    path_name: str
    media_server_id: str
    desired_state: State
    config_version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: DeviceRow) -> Device:
        return cls.model_validate(row, from_attributes=True)


class DevicePage(BaseModel):
    items: list[Device]
    next_after: uuid.UUID | None


class DeviceList(BaseModel):
    items: list[Device]


class ReconcileStatus(BaseModel):
    device_id: uuid.UUID
    desired_generation: int
    observed_generation: int
    status: Literal["pending", "converged", "failed"]
    attempts: int
    next_attempt_at: datetime | None = Field(
        description="When the reconciler tries again; null when MediaMTX refused the device's configuration "
        "(status `failed`, `last_error_reason` says why): it is not retried until the device changes "
        "(a PATCH, a desired state, a site move)."
    )
    last_error_code: str | None = Field(description="A stable code, e.g. `mediamtx_http_400`.")
    last_error_reason: str | None = Field(
        description="MediaMTX's reason for refusing the configuration, redacted: no source URI, quoted value "
        "or URL; printable ASCII, at most 200 characters. Null unless the last attempt was refused.",
        max_length=REASON_MAX_CHARS,
    )
    last_result_at: datetime | None
    partition: int
    media_server_id: str

    @classmethod
    def of(cls, state: ReconcileState) -> ReconcileStatus:
        return cls.model_validate(state, from_attributes=True)


class ReconcileStatusList(BaseModel):
    items: list[ReconcileStatus]


SiteKey = Annotated[str, Path(max_length=limits.ID_MAX_CHARS, json_schema_extra=ID_RULE)]
IdFilter = Annotated[str | None, Query(max_length=limits.ID_MAX_CHARS, json_schema_extra=ID_RULE)]
UNAUTHORIZED = (
    "unauthorized: no valid access token of the OpenID provider for the audience `sense-reconciler`, or the "
    f"request carries an `{ACTOR_HEADER}` header (refused: the actor is the access token's subject). Every "
    "such request gets the same body and changes nothing."
)
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": UNAUTHORIZED},
    **{code: {"model": Problem} for code in (404, 409, 422)},
}


# The 403 of each kind of operation, as `authorize` answers it.
CHANGES: dict[int | str, dict[str, Any]] = {
    403: {
        "model": Problem,
        "description": f"forbidden: the access token does not grant `{OPERATE}` (`detail` names it).",
    }
}
READS: dict[int | str, dict[str, Any]] = {
    403: {
        "model": Problem,
        "description": f"forbidden: the access token grants neither `{READ}` nor `{OPERATE}` (`detail` names "
        f"`{READ}`).",
    }
}


router = APIRouter(prefix="/v1", dependencies=[Depends(refuse_actor_header)], responses=ERRORS)


def use_cases(request: Request) -> SenseUseCases:
    """The process's use cases, as `install` put them on the app (a route reaches them only this way)."""
    installed: SenseUseCases = request.app.state.use_cases
    return installed


def devices_of(request: Request) -> Devices:
    return use_cases(request).devices


def sites_of(request: Request) -> Sites:
    return use_cases(request).sites


DevicesDep = Annotated[Devices, Depends(devices_of)]
SitesDep = Annotated[Sites, Depends(sites_of)]


@router.post("/devices", status_code=201, response_model=Device, responses=CHANGES)
async def create_device(caller: AccessTokenCaller, body: DeviceCreate, devices: DevicesDep) -> Device:
    authorize(caller, OPERATE)
    row = await devices.create_device(
        tenant_id=body.tenant_id,
        site_id=body.site_id,
        name=body.name,
        path_name=body.path_name,
        source_uri=body.source_uri,
        desired_state=DesiredState(body.desired_state),
        actor=caller.subject,
    )
    return Device.of(row)


@router.get("/devices", response_model=DevicePage, responses=READS)
async def list_devices(
    caller: AccessTokenCaller,
    devices: DevicesDep,
    tenant_id: IdFilter = None,
    site_id: IdFilter = None,
    after: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=limits.LIST_PAGE_SIZE_MAX)] = limits.LIST_PAGE_SIZE_DEFAULT,
) -> DevicePage:
    authorize(caller, READ)
    page = await devices.list_devices(tenant_id=tenant_id, site_id=site_id, after=after, limit=limit)
    return DevicePage(items=[Device.of(r) for r in page.items], next_after=page.next_after)


@router.get("/devices/{device_id}", response_model=Device, responses=READS)
async def get_device(caller: AccessTokenCaller, device_id: uuid.UUID, devices: DevicesDep) -> Device:
    authorize(caller, READ)
    return Device.of(await devices.get_device(device_id))


@router.patch("/devices/{device_id}", response_model=Device, responses=CHANGES)
async def change_config(
    caller: AccessTokenCaller, device_id: uuid.UUID, body: DeviceConfigChange, devices: DevicesDep
) -> Device:
    authorize(caller, OPERATE)
    row = await devices.change_config(
        device_id, name=body.name, source_uri=body.source_uri, actor=caller.subject
    )
    return Device.of(row)


@router.put("/devices/{device_id}/desired-state", response_model=Device, responses=CHANGES)
async def set_desired_state(
    caller: AccessTokenCaller, device_id: uuid.UUID, body: DesiredStateChange, devices: DevicesDep
) -> Device:
    authorize(caller, OPERATE)
    row = await devices.set_desired_state(device_id, DesiredState(body.desired_state), actor=caller.subject)
    return Device.of(row)


@router.post("/devices:set-desired-state", response_model=DeviceList, responses=CHANGES)
async def set_desired_state_batch(
    caller: AccessTokenCaller, body: DesiredStateBatch, devices: DevicesDep
) -> DeviceList:
    authorize(caller, OPERATE)
    items = [(item.device_id, DesiredState(item.desired_state)) for item in body.items]
    rows = await devices.set_desired_states(items, actor=caller.subject)
    return DeviceList(items=[Device.of(r) for r in rows])


@router.get("/devices/{device_id}/reconcile-status", response_model=ReconcileStatus, responses=READS)
async def reconcile_status(
    caller: AccessTokenCaller, device_id: uuid.UUID, devices: DevicesDep
) -> ReconcileStatus:
    authorize(caller, READ)
    return ReconcileStatus.of(await devices.reconcile_status(device_id))


@router.get("/reconcile-statuses", response_model=ReconcileStatusList, responses=READS)
async def reconcile_statuses(
    caller: AccessTokenCaller,
    device_id: Annotated[list[uuid.UUID], Query(min_length=1, max_length=limits.LIST_PAGE_SIZE_MAX)],
    devices: DevicesDep,
) -> ReconcileStatusList:
    """The reconcile state of several devices at once (a list page's ids); unknown ids are left out."""
    authorize(caller, READ)
    rows = await devices.reconcile_statuses(device_id)
    return ReconcileStatusList(items=[ReconcileStatus.of(r) for r in rows])


@router.get("/sites/{tenant_id}/{site_id}", response_model=Site, responses=READS)
async def get_site(caller: AccessTokenCaller, tenant_id: SiteKey, site_id: SiteKey, sites: SitesDep) -> Site:
    """The site's limit, enabled devices and MediaMTX server; a site Sense never saw has the defaults."""
    authorize(caller, READ)
    return Site.of(await sites.get_site(tenant_id, site_id))


@router.put("/sites/{tenant_id}/{site_id}", response_model=Site, responses=CHANGES)
async def configure_site(
    caller: AccessTokenCaller, tenant_id: SiteKey, site_id: SiteKey, body: SiteChange, sites: SitesDep
) -> Site:
    authorize(caller, OPERATE)
    row = await sites.configure_site(
        tenant_id,
        site_id,
        max_video_channels=body.max_video_channels,
        media_server_id=body.media_server_id,
        actor=caller.subject,
    )
    return Site.of(row)


def install(app: FastAPI, cases: SenseUseCases) -> None:
    """The Control API's routes on `app`, serving `cases`; the access token verifier is set apart:
    `use_access_tokens` in the composition root, `use_access_token_verifier` in tests and the benchmark."""
    app.state.use_cases = cases
    app.include_router(router)


def openapi_document() -> dict[str, object]:
    """The published contract (schemas/openapi/sense-reconciler.v1.json): the Control API routes only."""
    app = create_app(API_TITLE, API_VERSION)
    app.include_router(router)
    return app.openapi()
