"""Bell's HTTP API on the shell's FastAPI app, and the OpenAPI documents published under schemas/openapi/.

``schemas/openapi/bell-receiver.v1.json`` is the whole app's document; ``sense-audit-relay-v1.json`` is the
frozen contract of the signed batch endpoint cut from it (the batch path and the schemas it references,
plus the signing and limit rules). tests/integration/bell_receiver/test_contract.py regenerates both and
compares.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from bell_receiver.bootstrap import BellUseCases
from bell_receiver.entrypoints import http_audit, http_audit_batch, http_notifications
from bell_receiver.entrypoints.dependencies import BatchChecks
from yovision_platform import audit_push
from yovision_platform.audit_push import AuditEventBatch
from yovision_platform.security import MAX_CLOCK_SKEW_SECONDS, NONCE_RECEIPT_TTL_SECONDS
from yovision_platform.web import create_app, guard_policy, with_problem_responses

SERVICE_NAME = "bell-receiver"
OPENAPI_VERSION = "1.0.0"
REF_TEMPLATE = "#/components/schemas/{model}"

BATCH_PATH = audit_push.BATCH_PATH
AUDIT_BATCH_LIMITS = {
    "max_body_bytes": audit_push.MAX_BODY_BYTES,
    "min_items": audit_push.MIN_BATCH_ITEMS,
    "max_items": audit_push.MAX_BATCH_ITEMS,
    "request_deadline_seconds": audit_push.REQUEST_DEADLINE_SECONDS,
    "max_clock_skew_seconds": MAX_CLOCK_SKEW_SECONDS,
    "nonce_receipt_ttl_seconds": NONCE_RECEIPT_TTL_SECONDS,
}

AUDIT_BATCH_DESCRIPTION = """Sense pushes its device-audit facts to Bell: signed, replay-proof, idempotent.

Signing (scheme v1, docs/signing.md): `signature = "v1=" + hex(HMAC-SHA256(key, canonical))` where
canonical = METHOD, path, timestamp, nonce and hex(SHA256(body)) joined by newlines, path = the raw request
target. Keys: at least 32 random bytes. Clock skew accepted: {max_clock_skew_seconds} s either way. Any
signature problem: 401 `unauthorized`, the same for every cause.

Replay: Bell keeps a receipt per (key id, nonce) for {nonce_receipt_ttl_seconds} s. The same key, nonce and
request (method, path, timestamp, nonce, body) gets the original response byte for byte; a different request
with that key and nonce gets 409 `replay_conflict`.

Limits: body at most {max_body_bytes} bytes (413 `body_too_large`, checked on Content-Length and while
streaming); {min_items}..{max_items} items; request deadline {request_deadline_seconds:g} s.
A malformed envelope is refused as a whole (400); a malformed item is rejected alone (its code in its
result) and the other items are processed.

Items: same (source_system=sense, event_id) with the same canonical digest = `duplicate`; with another
digest = `rejected` / `id_conflict`. Canonical digest: SHA-256 of the validated fact as JSON with sorted
keys and no whitespace, event_id lowercase, occurred_at in UTC as YYYY-MM-DDTHH:MM:SS.ffffffZ.
Responses never echo the body, the signature or any field value except a valid event_id.
Frozen: a change needs a new contract (sense-audit-relay-v2).""".format(**AUDIT_BATCH_LIMITS)


def _publish_batch_schemas(app: FastAPI) -> None:
    """Add the manually parsed batch body's schemas to the app's OpenAPI components, and the platform's
    answers to every operation but the frozen batch endpoint's."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = with_problem_responses(
                get_openapi(title=app.title, version=app.version, routes=app.routes), skip_paths=[BATCH_PATH]
            )
            components = document.setdefault("components", {}).setdefault("schemas", {})
            batch = AuditEventBatch.model_json_schema(ref_template=REF_TEMPLATE)
            components.update(batch.pop("$defs", {}))
            components["AuditEventBatch"] = batch
            document["components"]["schemas"] = dict(sorted(components.items()))
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def include_api(app: FastAPI) -> None:
    """Bell's routes on `app` (module-level routers: `http_audit_batch`, `http_notifications`,
    `http_audit`) and its OpenAPI document; what they call comes from `mount_api`."""
    # The batch endpoint enforces its own read deadline and answers in the frozen contract's error body; a
    # NUL in an item is rejected per item by the facts' patterns (invalid_field).
    guard_policy(app).override("POST", re.escape(BATCH_PATH), body_rule=None, check_text=False)
    for router in (http_audit_batch.router, http_notifications.router, http_audit.router):
        app.include_router(router)
    _publish_batch_schemas(app)


def mount_api(app: FastAPI, *, use_cases: BellUseCases, checks: BatchChecks) -> None:
    """Bell's routes on `app`, calling `use_cases`. The read routes check the caller's access token with
    the verifier on the app (`use_access_tokens` in the entrypoint; `use_access_token_verifier` in tests)."""
    app.state.use_cases = use_cases
    app.state.batch_checks = checks
    include_api(app)


def openapi_document(version: str) -> dict[str, Any]:
    """The app's OpenAPI document, from the production routes alone: rendering it resolves no dependency
    (no use case, no key ring, no access token verifier)."""
    app = create_app(SERVICE_NAME, version)
    include_api(app)
    return app.openapi()


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node)) if node else set()
    return set()


def audit_batch_contract(service: dict[str, Any]) -> dict[str, Any]:
    """The frozen contract sense-audit-relay-v1: the batch operation of ``service`` and every schema it
    references."""
    path_item = service["paths"][BATCH_PATH]
    all_schemas = service["components"]["schemas"]
    needed: set[str] = set()
    pending = _refs(path_item)
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending |= _refs(all_schemas[name])
    return {
        "openapi": service["openapi"],
        "info": {
            "title": audit_push.CONTRACT_NAME,
            "version": OPENAPI_VERSION,
            "description": AUDIT_BATCH_DESCRIPTION,
        },
        "x-limits": AUDIT_BATCH_LIMITS,
        "paths": {BATCH_PATH: path_item},
        "components": {"schemas": {name: all_schemas[name] for name in sorted(needed)}},
    }
