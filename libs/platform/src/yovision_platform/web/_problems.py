"""One error body for every service: problem details (RFC 9457) with a stable `code`.

    HTTP/1.1 422 Unprocessable Content
    Content-Type: application/problem+json

    {"type": "about:blank", "title": "Unprocessable Content", "status": 422,
     "code": "invalid_request", "error": "invalid_request", "fields": ["name"]}

`code` is the stable snake_case code clients branch on; `error` repeats it for clients of the earlier
`{"error": code}` body; `fields` (validation errors only) names the offending fields by their path, never
their values; `retry_after` (every answer with a `Retry-After` header: 429, 503, and 409s that clear by
themselves) repeats the header's seconds; `detail` (RFC 9457), only where a `ServiceError` carries one, is a
fixed explanation of its code written by the service (e.g. the accepted forms of a field), never input.
No body ever carries caller input, a driver message or a traceback.

`install_problem_handlers(app)` maps what the framework and the platform raise:

    validation error                       422 invalid_request (+ fields)
    body that is not JSON                  400 invalid_json
    JSON body sent as another media type   415 unsupported_media_type
    unknown route / wrong method           404 not_found / 405 method_not_allowed (+ Allow)
    `ServiceError` (every service's refusals, raised anywhere: a use case, a dependency, a guard's
    `receive` while FastAPI parses the body)  its status and code (+ Retry-After, its headers)
    PostgreSQL unreachable                 503 database_unavailable (+ Retry-After)
    a transaction PostgreSQL rolled back   503 database_busy (+ Retry-After): a deadlock or serialization
      (SQLSTATE class 40)                  failure is another transaction's timing, not the request's
    Kafka unreachable                      503 broker_unavailable (+ Retry-After)
    anything else                          500 internal_error (the traceback goes to the log only)
"""

from __future__ import annotations

import email.message
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http import HTTPStatus
from typing import Any

from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, NodeNotReadyError
from asyncpg import InterfaceError, PostgresError, TransactionRollbackError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.routing import Match

from yovision_platform.errors import ServiceError
from yovision_platform.storage._db import DatabaseUnavailable, is_database_unavailable

__all__ = [
    "BROKER_RETRY_AFTER_SECONDS",
    "DATABASE_RETRY_AFTER_SECONDS",
    "PROBLEM_MEDIA_TYPE",
    "Problem",
    "install_problem_handlers",
    "problem_response",
]

log = logging.getLogger("yovision_platform.problems")

PROBLEM_MEDIA_TYPE = "application/problem+json"
DATABASE_RETRY_AFTER_SECONDS = 5
DATABASE_BUSY_RETRY_AFTER_SECONDS = 1
BROKER_RETRY_AFTER_SECONDS = 5
BROKER_UNAVAILABLE_ERRORS = (KafkaConnectionError, KafkaTimeoutError, NodeNotReadyError)
_CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "body_too_large",
    415: "unsupported_media_type",
    500: "internal_error",
    503: "unavailable",
}


class Problem(BaseModel):
    """Every error response of the APIs (media type application/problem+json)."""

    model_config = ConfigDict(title="Problem")

    type: str = Field(default="about:blank", description="Always about:blank: `code` says what happened.")
    title: str = Field(description="The HTTP status phrase.")
    status: int = Field(ge=400, le=599)
    code: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Stable snake_case code.")
    error: str = Field(description="The same code, for clients of the earlier {error: code} body.")
    fields: list[str] | None = Field(
        default=None, description="Validation errors only: the paths of the offending fields, never values."
    )
    retry_after: int | None = Field(
        default=None, ge=0, description="With a Retry-After header (429, 503): the same seconds."
    )
    detail: str | None = Field(
        default=None,
        description="Where a code has one: a fixed explanation of it (e.g. the accepted forms), never input.",
    )


def problem_response(
    status: int,
    code: str,
    *,
    headers: Mapping[str, str] | None = None,
    fields: Iterable[str] | None = None,
    detail: str | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "code": code,
        "error": code,
    }
    if fields is not None:
        body["fields"] = list(fields)
    retry_after = next((v for k, v in (headers or {}).items() if k.lower() == "retry-after"), None)
    if retry_after is not None and retry_after.isdigit():
        body["retry_after"] = int(retry_after)
    if detail is not None:
        body["detail"] = detail
    return JSONResponse(body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_MEDIA_TYPE)


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def field_paths(exc: RequestValidationError) -> list[str]:
    """Where each validation error is (`name`, `headers.0.key`, `query.limit`), without the input."""
    paths = set()
    for error in exc.errors():
        location = [str(part) for part in error.get("loc", ())]
        if location and location[0] == "body":
            location = location[1:]
        paths.add(".".join(location) or "body")
    return sorted(paths)


async def _validation_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any(error.get("type") == "json_invalid" for error in errors):
        return problem_response(400, "invalid_json")
    body_errors = [e for e in errors if tuple(e.get("loc", ()))[:1] == ("body",)]
    content_type = request.headers.get("content-type")
    if body_errors and content_type and not _is_json(content_type):
        return problem_response(415, "unsupported_media_type")
    return problem_response(422, "invalid_request", fields=field_paths(exc))


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (Starlette's own Allow names one route's at most)."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]
    return ", ".join(allowed)


async def _service_problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return problem_response(exc.status, exc.code, headers=exc.response_headers(), detail=exc.detail)


async def _http_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, ServiceError):  # FastAPI wraps what body parsing raised in a 400
        return await _service_problem(request, exc.__cause__)
    code = _CODE_BY_STATUS.get(exc.status_code)
    if code is None:
        code = "client_error" if exc.status_code < 500 else "server_error"
    if exc.status_code == 400:
        code = "invalid_body"  # FastAPI's "There was an error parsing the body"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request)
    return problem_response(exc.status_code, code, headers=headers)


async def _database_problem(_: Request, exc: Exception) -> JSONResponse:
    log.warning("request refused: database unavailable", extra={"error_code": type(exc).__name__})
    return problem_response(
        503, "database_unavailable", headers={"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}
    )


async def _broker_problem(_: Request, exc: Exception) -> JSONResponse:
    log.warning("request refused: broker unavailable", extra={"error_code": type(exc).__name__})
    return problem_response(
        503, "broker_unavailable", headers={"Retry-After": str(BROKER_RETRY_AFTER_SECONDS)}
    )


async def _postgres_problem(request: Request, exc: Exception) -> JSONResponse:
    if is_database_unavailable(exc):
        return await _database_problem(request, exc)
    if isinstance(exc, TransactionRollbackError):
        log.warning("request refused: transaction rolled back", extra={"error_code": exc.sqlstate})
        return problem_response(
            503, "database_busy", headers={"Retry-After": str(DATABASE_BUSY_RETRY_AFTER_SECONDS)}
        )
    # Only the SQLSTATE: server messages may quote the statement's values.
    log.error(
        "request failed: database error",
        extra={"error_code": getattr(exc, "sqlstate", None) or type(exc).__name__},
        exc_info=True,
    )
    return problem_response(500, "internal_error")


async def _unexpected_problem(_: Request, __: Exception) -> JSONResponse:
    return problem_response(500, "internal_error")


Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every framework, platform and dependency failure of `app`, and every `ServiceError` a
    service raises, with a `Problem`."""
    handlers: dict[type[Exception], Handler] = {
        RequestValidationError: _validation_problem,
        HTTPException: _http_problem,
        ServiceError: _service_problem,
        DatabaseUnavailable: _database_problem,
        InterfaceError: _database_problem,
        PostgresError: _postgres_problem,  # only connection and shutdown states are "unavailable"
        **dict.fromkeys(BROKER_UNAVAILABLE_ERRORS, _broker_problem),
        # Starlette's server-error middleware runs this one; it re-raises, so the traceback is logged.
        Exception: _unexpected_problem,
    }
    for exc_class, handler in handlers.items():
        app.add_exception_handler(exc_class, handler)
