"""HTTP API of media-worker: uploads, material status, outputs, retry, drain.

Identity comes from a verified access token of the OpenID provider (`AccessTokenCaller`, audience
`media-worker`; the entrypoint puts the verifier on the app with `use_access_tokens`); a user sees only
materials and upload sessions of its own subject (anything else is `not_found`). The drain endpoints need the
`media:drain` permission. The plain upload and the chunk PUT read their bodies themselves
(`request.stream()`), so the token is verified, like every route dependency, before any byte of the body is
read or stored. Error bodies are problem details with a stable `code` only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import ClientDisconnect

from media_worker.bootstrap import MediaUseCases
from media_worker.domain.errors import (
    ChunkSlotsBusy,
    Draining,
    InsufficientStorage,
    InvalidUpload,
    LayoutRefused,
    LengthRequired,
    MaterialNotFound,
    MediaRefusal,
    MergeInProgress,
    NotRetryable,
    UploadConflict,
    UploadTooLarge,
)
from media_worker.domain.limits import CHUNK_COUNT_MAX, CHUNK_MAX_BYTES, CHUNK_MIN_BYTES, SOURCE_MAX_BYTES
from media_worker.domain.material import Material
from media_worker.domain.sessions import SessionState, UploadSession
from media_worker.entrypoints.multipart import file_part_stream
from media_worker.service_layer.drain import DrainReport
from media_worker.service_layer.materials import MATERIAL_PAGE_MAX_ITEMS
from media_worker.service_layer.metrics import DisconnectedUpload, MediaMetrics
from yovision_platform.errors import ServiceError
from yovision_platform.web import (
    AccessTokenCaller,
    BodyReadRule,
    Identity,
    InvalidCursor,
    JsonInt,
    create_app,
    cursor_query,
    guard_policy,
    problem_response,
)

__all__ = ["DRAIN_PERMISSION", "include_api", "openapi_document", "router", "use_cases_of"]

log = logging.getLogger(__name__)

DRAIN_PERMISSION = "media:drain"


class InitUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    upload_key: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    total_bytes: JsonInt = Field(
        ge=1,
        description=f"At most {SOURCE_MAX_BYTES} (else 422 `source_too_large`).",
        json_schema_extra={"maximum": SOURCE_MAX_BYTES},
    )
    chunk_bytes: JsonInt = Field(
        ge=1,
        description=f"The size of every chunk but the last, which holds the rest (a source of at most "
        f"`chunk_bytes` is one chunk): {CHUNK_MIN_BYTES} to {CHUNK_MAX_BYTES} (else 422 "
        f"`chunk_bytes_too_small` / `chunk_bytes_too_large`), so an upload has at most {CHUNK_COUNT_MAX} "
        "chunks.",
        json_schema_extra={"minimum": CHUNK_MIN_BYTES, "maximum": CHUNK_MAX_BYTES},
    )
    title: str = Field(default="", max_length=200)
    content_type: str | None = Field(default=None, max_length=100)


def _session_view(session: UploadSession) -> dict[str, Any]:
    layout = session.layout
    completed = session.state == SessionState.COMPLETED
    return {
        "session_id": str(session.session_id),
        "state": session.state.value,
        "total_bytes": layout.total_bytes,
        "chunk_bytes": layout.chunk_bytes,
        "chunk_count": layout.chunk_count,
        "received": sorted(session.received),
        "missing": session.missing,
        "material_id": str(session.material_id) if completed else None,
    }


def _material_view(material: Material) -> dict[str, Any]:
    return {
        "material_id": str(material.material_id),
        "title": material.title,
        "status": material.status.value,
        "progress": material.progress,
        "error_code": material.error_code,
        "size_bytes": material.size_bytes,
        "outputs": sorted(material.outputs),
        "created_at": material.created_at.isoformat(),
        "protection_until": material.protection_until.isoformat(),
        # The source location stays hidden during the protection window; status and progress never are.
        "source_key": material.shown_source_key,
    }


def _drain_view(report: DrainReport) -> dict[str, Any]:
    return {
        "instance_id": report.instance_id,
        "capability_instance_id": report.capability_instance_id,
        "draining": report.draining,
        "active_jobs": report.work.jobs,
        "active_uploads": report.work.uploads,
        "active_merges": report.work.merges,
        "safe_to_stop": report.verdict.safe_to_stop,
        "reason": report.verdict.reason,
    }


def use_cases_of(request: Request) -> MediaUseCases:
    """The use cases the routes call (`include_api`). Who calls is `AccessTokenCaller`'s: the app's verifier,
    `use_access_tokens` in the entrypoint, `use_access_token_verifier` in tests."""
    use_cases: MediaUseCases = request.app.state.use_cases
    return use_cases


def _metrics(request: Request) -> MediaMetrics | None:
    """What counts the refusals and the disconnects (`include_api`; None: nothing counts)."""
    metrics: MediaMetrics | None = request.app.state.media_metrics
    return metrics


UseCases = Annotated[MediaUseCases, Depends(use_cases_of)]


class RefusalCountingRoute(APIRoute):
    """A route that counts each refusal it answers (`media_api_refusals_total{code}`); the platform's
    problem handlers answer it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def counted(request: Request) -> Response:
            try:
                return await handler(request)
            except (MediaRefusal, InvalidCursor) as refusal:
                metrics = _metrics(request)
                if metrics is not None:
                    metrics.refusals.labels(code=refusal.code).inc()
                raise

        return counted


router = APIRouter(route_class=RefusalCountingRoute)


def refusals(*answers: ServiceError) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route's refusals, grouped by their HTTP status."""
    by_status: dict[int, list[str]] = {}
    for answer in answers:
        by_status.setdefault(answer.status, []).append(answer.code)
    return {status: {"description": " | ".join(names)} for status, names in sorted(by_status.items())}


FORBIDDEN: dict[int | str, dict[str, Any]] = {
    403: {"description": f"forbidden: the token lacks `{DRAIN_PERMISSION}`"}
}
DRAINING = (Draining(),)  # 503 with Retry-After while this instance drains
STORAGE = (InsufficientStorage("free_space_unknown"), InsufficientStorage("insufficient_storage"))


def _operator(user: AccessTokenCaller) -> Identity:
    user.require(DRAIN_PERMISSION)
    return user


Operator = Annotated[Identity, Depends(_operator)]


PLAIN_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary", "minLength": 1}},
                    "required": ["file"],
                }
            }
        },
    }
}


@router.post(
    "/v1/materials",
    status_code=201,
    openapi_extra=PLAIN_UPLOAD_BODY,
    responses=refusals(
        LengthRequired(),
        UploadTooLarge("request_too_large"),
        UploadTooLarge("chunked_upload_required"),
        InvalidUpload("invalid_multipart"),
        *DRAINING,
        *STORAGE,
    ),
)
async def upload_plain(
    use_cases: UseCases, request: Request, user: AccessTokenCaller, title: str = Query("", max_length=200)
) -> dict[str, Any]:
    """Plain multipart upload (one part named `file`); the declared length is checked before parsing."""
    body: AsyncIterator[bytes] = file_part_stream(request.headers.get("content-type"), request.stream())
    material_id = await use_cases.uploads.upload_plain(
        user.subject, title, None, body, request_length=request.headers.get("content-length")
    )
    return {"material_id": str(material_id), "status": "pending"}


@router.post(
    "/v1/uploads",
    status_code=201,
    responses={
        200: {"description": "Resumed: a session of this `upload_key` with the same layout already exists"},
        201: {"description": "Created: a new session"},
        **refusals(
            InvalidUpload("invalid_layout"),
            LayoutRefused("source_too_large"),
            LayoutRefused("chunk_bytes_too_large"),
            LayoutRefused("chunk_bytes_too_small"),
            UploadConflict("layout_conflict"),
            *DRAINING,
            *STORAGE,
        ),
    },
)
async def init_upload(
    use_cases: UseCases, spec: InitUpload, user: AccessTokenCaller, response: Response
) -> dict[str, Any]:
    """Start a chunked upload, or resume the caller's session of the same `upload_key` (same layout only,
    else 409 `layout_conflict`)."""
    outcome = await use_cases.uploads.init(
        user.subject, spec.upload_key, spec.total_bytes, spec.chunk_bytes, spec.title, spec.content_type
    )
    if not outcome.created:
        response.status_code = 200
    return _session_view(outcome.session)


@router.get("/v1/uploads/{session_id}", responses=refusals(MaterialNotFound()))
async def upload_state(use_cases: UseCases, session_id: uuid.UUID, user: AccessTokenCaller) -> dict[str, Any]:
    return _session_view(await use_cases.uploads.session(user.subject, session_id))


@router.put(
    "/v1/uploads/{session_id}/chunks/{index}",
    responses=refusals(
        MaterialNotFound(),
        InvalidUpload("chunk_index_out_of_range"),
        InvalidUpload("chunk_size_mismatch"),
        InvalidUpload("chunk_checksum_mismatch"),
        UploadTooLarge("chunk_too_large"),
        UploadConflict("upload_not_open"),
        ChunkSlotsBusy(),
        *DRAINING,
        *STORAGE,
    ),
)
async def put_chunk(
    use_cases: UseCases, session_id: uuid.UUID, index: int, request: Request, user: AccessTokenCaller
) -> dict[str, Any]:
    """Raw chunk body; it must be exactly the layout's size for `index` (optional `X-Chunk-Sha256`)."""
    declared = request.headers.get("content-length")
    session = await use_cases.uploads.put_chunk(
        user.subject,
        session_id,
        index,
        int(declared) if declared is not None and declared.isdigit() else None,
        request.stream(),
        request.headers.get("x-chunk-sha256"),
    )
    return _session_view(session)


@router.post(
    "/v1/uploads/{session_id}/complete",
    responses=refusals(
        MaterialNotFound(),
        UploadConflict("upload_incomplete"),
        MergeInProgress(),
        InvalidUpload("chunk_size_mismatch"),
        *STORAGE,
    ),
)
async def complete_upload(
    use_cases: UseCases, session_id: uuid.UUID, user: AccessTokenCaller
) -> dict[str, Any]:
    material_id = await use_cases.uploads.complete(user.subject, session_id)
    return {"material_id": str(material_id)}


@router.get("/v1/materials", responses=refusals(InvalidCursor()))
async def list_materials(
    use_cases: UseCases,
    user: AccessTokenCaller,
    limit: Annotated[int, Query(ge=1, le=MATERIAL_PAGE_MAX_ITEMS)] = 20,
    cursor: Annotated[str | None, cursor_query(uuid.UUID)] = None,
) -> dict[str, Any]:
    """The caller's materials, newest first, keyset-paged (`next_cursor`)."""
    page = await use_cases.materials.page(user.subject, limit, cursor)
    return {"items": [_material_view(m) for m in page.items], "next_cursor": page.next_cursor}


@router.get("/v1/materials/{material_id}", responses=refusals(MaterialNotFound()))
async def material_status(
    use_cases: UseCases, material_id: uuid.UUID, user: AccessTokenCaller
) -> dict[str, Any]:
    return _material_view(await use_cases.materials.status(user.subject, material_id))


@router.get(
    "/v1/materials/{material_id}/outputs/{kind}", response_model=None, responses=refusals(MaterialNotFound())
)
async def material_output(
    use_cases: UseCases, material_id: uuid.UUID, kind: str, user: AccessTokenCaller
) -> FileResponse:
    """Streams one output (`cover`, `preview_720p`, `clip_10s`) from the storage."""
    output = await use_cases.materials.output(user.subject, material_id, kind)
    return FileResponse(output.path, media_type=output.media_type)


@router.post(
    "/v1/materials/{material_id}/retry",
    status_code=202,
    responses=refusals(MaterialNotFound(), NotRetryable()),
)
async def retry_material(
    use_cases: UseCases, material_id: uuid.UUID, user: AccessTokenCaller
) -> dict[str, Any]:
    await use_cases.materials.retry(user.subject, material_id)
    return {"material_id": str(material_id), "status": "pending"}


@router.post("/internal/drain", responses=FORBIDDEN)
async def request_drain(use_cases: UseCases, _: Operator) -> dict[str, Any]:
    """Stop taking new jobs and uploads; in-flight work finishes."""
    return _drain_view(await use_cases.drain.request())


@router.get("/internal/drain", responses=FORBIDDEN)
async def drain_state(use_cases: UseCases, _: Operator) -> dict[str, Any]:
    return _drain_view(use_cases.drain.report())


@router.get("/internal/instances", responses=FORBIDDEN)
async def worker_instances(use_cases: UseCases, _: Operator) -> dict[str, Any]:
    """Every instance that registered, with its recorded drain request and the jobs it holds leases on.
    Whether one may be stopped is only its own `/internal/drain` answer: this list is what the database
    knows."""
    this_instance = use_cases.drain.instance_id
    return {
        "items": [
            {
                "instance_id": i.instance_id,
                "started_at": i.started_at.isoformat(),
                "seen_at": i.seen_at.isoformat(),
                "draining": i.draining,
                "leased_jobs": i.leased_jobs,
                "this_instance": i.instance_id == this_instance,
            }
            for i in await use_cases.drain.instances()
        ]
    }


DISCONNECTED_UPLOADS: dict[object, DisconnectedUpload] = {
    upload_plain: DisconnectedUpload.PLAIN,
    put_chunk: DisconnectedUpload.CHUNK,
}


async def client_disconnected(request: Request, _: Exception) -> JSONResponse:
    """An expected event: the upload use case already released its slot and removed its partial file.
    Counted and logged at info without a traceback; the answer reaches nobody."""
    upload = DISCONNECTED_UPLOADS.get(request.scope.get("endpoint"), DisconnectedUpload.OTHER)
    metrics = _metrics(request)
    if metrics is not None:
        metrics.client_disconnects.labels(upload=upload).inc()
    log.info("client disconnected before sending the whole body", extra={"upload": upload.value})
    return problem_response(400, "client_disconnected")


def include_api(app: FastAPI, use_cases: MediaUseCases, metrics: MediaMetrics | None = None) -> None:
    """Serve the routes on `app`, calling `use_cases`; `metrics` counts refusals and disconnects."""
    app.state.use_cases = use_cases
    app.state.media_metrics = metrics
    app.add_exception_handler(ClientDisconnect, client_disconnected)
    app.include_router(router)


UPLOAD_ROUTES = (("POST", r"/v1/materials"), ("PUT", r"/v1/uploads/[^/]+/chunks/[^/]+"))


def set_upload_body_rule(app: FastAPI, rule: BodyReadRule) -> None:
    """Upload bodies follow `rule` (a minimum rate) instead of the platform's fixed read deadline."""
    for method, path in UPLOAD_ROUTES:
        guard_policy(app).override(method, path, body_rule=rule)


def openapi_document(version: str) -> dict[str, Any]:
    """The OpenAPI document of the served API (published as schemas/openapi/media-worker.v1.json). Building
    it calls no route: no use case, no verifier, nothing connects anywhere."""
    app = create_app("media-worker", version)
    app.include_router(router)
    return app.openapi()
