"""The FastAPI app every service serves and documents: request guards, problem errors, honest OpenAPI.

`create_app(title, version)` is used by the process shell and by each service's OpenAPI generator, so the
published documents describe exactly what the served app does:

- `RequestGuards` (body read deadline, NUL-free text; see :mod:`.guards`), adjustable per route through
  `guard_policy(app)`;
- `install_problem_handlers` (one `Problem` body for every error; see :mod:`.problems`);
- the OpenAPI document states, for every operation, the answers the platform adds: 400 (`invalid_text`,
  `invalid_json`), 408 (`request_timeout`) and 415 (`unsupported_media_type`) where a body is read, 422
  (`invalid_request` with `fields`), 500 (`internal_error`) and 503 (`database_unavailable`,
  `broker_unavailable`, with `Retry-After`); every error response is `application/problem+json`.
  Paths listed in `skip_paths` (a frozen contract with its own error body) are left exactly as declared.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI

from yovision_platform.guards import RequestGuardPolicy, RequestGuards
from yovision_platform.problems import PROBLEM_MEDIA_TYPE, Problem, install_problem_handlers

__all__ = ["create_app", "guard_policy", "with_problem_responses"]

PROBLEM_REF = "#/components/schemas/Problem"
_BODY_METHODS = ("post", "put", "patch")
_FRAMEWORK_SCHEMAS = ("HTTPValidationError", "ValidationError")
_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
}
_PLATFORM_ANSWERS: dict[str, str] = {
    "400": "invalid_text: a NUL character in the path, query, a header or a JSON string; "
    "invalid_json: the body is not JSON.",
    "422": "invalid_request: `fields` names the invalid fields (never their values).",
    "500": "internal_error: an unexpected failure (logged; nothing is echoed).",
    "503": "database_unavailable | broker_unavailable: a dependency is down; retry after `Retry-After`.",
}
_BODY_ANSWERS: dict[str, str] = {
    "408": "request_timeout: the body did not arrive within the read deadline.",
    "415": "unsupported_media_type: a JSON body sent with another Content-Type.",
}


def create_app(title: str, version: str, *, skip_paths: Iterable[str] = ()) -> FastAPI:
    app = FastAPI(title=title, version=version)
    policy = RequestGuardPolicy()
    app.state.request_guard_policy = policy
    app.add_middleware(RequestGuards, policy=policy)
    install_problem_handlers(app)
    frozen = frozenset(skip_paths)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = with_problem_responses(generate(), skip_paths=frozen)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def guard_policy(app: FastAPI) -> RequestGuardPolicy:
    """The request guard rules of an app made by `create_app`."""
    policy: RequestGuardPolicy = app.state.request_guard_policy
    return policy


def _describe(responses: dict[str, Any], status: str, answer: str) -> None:
    existing = responses.get(status)
    if existing is None:
        responses[status] = {"description": answer}
    elif answer not in existing.get("description", ""):
        described = existing.get("description", "")
        generic = described in ("", "Validation Error", HTTPStatus(int(status)).phrase)
        existing["description"] = answer if generic else f"{described} {answer}"


def with_problem_responses(document: dict[str, Any], *, skip_paths: Iterable[str] = ()) -> dict[str, Any]:
    """A copy of `document` whose operations (outside `skip_paths`) declare the platform's answers and
    whose error responses all have the `Problem` body."""
    result = copy.deepcopy(document)
    skipped = frozenset(skip_paths)
    for path, item in result.get("paths", {}).items():
        if path in skipped:
            continue
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses: dict[str, Any] = operation["responses"]
            for status, answer in _PLATFORM_ANSWERS.items():
                if status != "422" or "422" in responses:
                    _describe(responses, status, answer)
            if method in _BODY_METHODS:
                for status, answer in _BODY_ANSWERS.items():
                    _describe(responses, status, answer)
            responses["503"]["headers"] = _RETRY_AFTER
            for status, response in responses.items():
                if status[:1] in ("4", "5"):
                    response["content"] = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": PROBLEM_REF}}}
            operation["responses"] = dict(sorted(responses.items()))
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Problem"] = Problem.model_json_schema()
    text = repr(result["paths"])
    for name in _FRAMEWORK_SCHEMAS:
        if f"#/components/schemas/{name}" not in text:
            schemas.pop(name, None)
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    return result
