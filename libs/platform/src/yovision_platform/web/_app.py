"""The FastAPI app every service serves and documents: request guards, problem errors, honest OpenAPI.

`create_app(title, version)` is used by the process shell and by each service's OpenAPI generator, so the
published documents describe exactly what the served app does:

- `RequestGuards` (body read deadline, NUL-free text; see :mod:`.guards`), adjustable per route through
  `guard_policy(app)`;
- `install_problem_handlers` (one `Problem` body for every error; see :mod:`.problems`);
- the OpenAPI document states, for every operation, the answers the platform adds: 400 (`invalid_text`,
  `invalid_json`), 408 (`request_timeout`) where a body is read and 415 (`unsupported_media_type`) where a
  JSON body is declared, 422
  (`invalid_request` with `fields`), 500 (`internal_error`) and 503 (`database_unavailable`, `database_busy`,
  `broker_unavailable`, with `Retry-After`), 401 (`unauthorized`) where the operation names a security
  scheme (`yovision_platform.web`); every error response is `application/problem+json`;
- every request string without a pattern or format gets the NUL-free pattern of the text rule, so a
  schema-valid string is one the guards let through.
- no rule beyond what JSON Schema states: an API either accepts what its schema allows, or changes the
  schema until it can say the rule (docs/decisions.md, "Contracts a fuzzer can check");
- paths listed in `skip_paths` (a frozen contract with its own error body) are left exactly as declared.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import AwareDatetime, BeforeValidator

from yovision_platform.web._guards import NUL_FREE_PATTERN, RequestGuardPolicy, RequestGuards
from yovision_platform.web._problems import PROBLEM_MEDIA_TYPE, Problem, install_problem_handlers

__all__ = [
    "JSON_INTEGER",
    "JsonInt",
    "Rfc3339DateTime",
    "create_app",
    "guard_policy",
    "with_problem_responses",
]

_SCHEMA_PREFIX = "#/components/schemas/"
PROBLEM_REF = f"{_SCHEMA_PREFIX}Problem"
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
    "503": "database_unavailable | broker_unavailable: a dependency is down; database_busy: the database "
    "rolled the transaction back (a deadlock or serialization failure); retry after `Retry-After`.",
}
_SECURED_ANSWER = "unauthorized: no valid bearer credential (`WWW-Authenticate: Bearer`)."
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


_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _rfc3339_text(value: object) -> object:
    """Only the RFC 3339 text `format: date-time` names; pydantic would also read `0.5` as a Unix time."""
    if isinstance(value, str) and _RFC3339.fullmatch(value) is None:
        raise ValueError("not an RFC 3339 date-time")
    return value


Rfc3339DateTime = Annotated[AwareDatetime, BeforeValidator(_rfc3339_text)]


def _json_integer(value: object) -> object:
    """A JSON Schema `integer`: an int or an integral number (`1.0`); never `true` or `"1"`, which
    pydantic's lax mode reads as 1 (StrictInt would refuse `1.0`, which JSON Schema calls an integer)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("not an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("not an integer")
    return int(value)


JSON_INTEGER = BeforeValidator(_json_integer)
# With range constraints in a union, name them first: `Annotated[int, Field(ge=1), JSON_INTEGER] | None`
# (after the validator, pydantic cannot put them into the published integer schema).
JsonInt = Annotated[int, JSON_INTEGER]


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
            if operation.get("security"):
                _describe(responses, "401", _SECURED_ANSWER)
            for status, answer in _PLATFORM_ANSWERS.items():
                if status != "422" or "422" in responses:
                    _describe(responses, status, answer)
            body = operation.get("requestBody", {}).get("content", {})
            if method in _BODY_METHODS:  # a body may be read (raw routes declare none)
                for status, answer in _BODY_ANSWERS.items():
                    if status != "415" or "application/json" in body:
                        _describe(responses, status, answer)
            for status in ("429", "503"):  # each answered with Retry-After and `retry_after`
                if status in responses:
                    responses[status]["headers"] = _RETRY_AFTER
            for status, response in responses.items():
                if status[:1] in ("4", "5"):
                    response["content"] = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": PROBLEM_REF}}}
            operation["responses"] = dict(sorted(responses.items()))
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    _forbid_nul(result, skipped)
    schemas["Problem"] = Problem.model_json_schema()
    text = repr(result["paths"])
    for name in _FRAMEWORK_SCHEMAS:
        if f"#/components/schemas/{name}" not in text:
            schemas.pop(name, None)
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    return result


def _forbid_nul(document: dict[str, Any], skipped: frozenset[str]) -> None:
    """Give every free string a request can carry (parameters, bodies and the component schemas they use,
    outside `skipped`) the text rule's NUL-free pattern. Schemas a skipped path uses are left as they are."""
    schemas: dict[str, Any] = document.get("components", {}).get("schemas", {})
    frozen = _referenced(
        [item for path, item in document.get("paths", {}).items() if path in skipped], schemas
    )
    seen: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for child in node:
                visit(child)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_SCHEMA_PREFIX):
            name = ref.removeprefix(_SCHEMA_PREFIX)
            if name not in seen and name not in frozen and name in schemas:
                seen.add(name)
                visit(schemas[name])
            return
        if "pattern" in node and "anyOf" in node:  # `str | None` with a pattern: it belongs to the string
            for branch in node["anyOf"]:
                if branch.get("type") == "string":
                    branch["pattern"] = node["pattern"]
            del node["pattern"]
        if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & node.keys():
            node["pattern"] = NUL_FREE_PATTERN
        for key, child in node.items():
            if key not in ("example", "examples", "default"):
                visit(child)

    for path, item in document.get("paths", {}).items():
        if path in skipped:
            continue
        for operation in item.values():
            if isinstance(operation, dict):
                visit(operation.get("parameters", []))
                visit(operation.get("requestBody", {}))


def _referenced(nodes: Any, schemas: dict[str, Any]) -> set[str]:
    """The names of the component schemas `nodes` use, directly or through other schemas."""
    found: set[str] = set()
    pending = [nodes]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_SCHEMA_PREFIX):
                name = ref.removeprefix(_SCHEMA_PREFIX)
                if name not in found:
                    found.add(name)
                    pending.append(schemas.get(name, {}))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return found
