"""orphan-scanner's HTTP API on the shell's FastAPI app (the read routes of `http_reports`), and its OpenAPI
document (schemas/openapi/orphan-scanner.v1.json; tests/unit/orphan_scanner/test_openapi.py compares)."""

from __future__ import annotations

from fastapi import FastAPI

from orphan_scanner.bootstrap import OrphanUseCases
from orphan_scanner.entrypoints import http_reports
from yovision_platform.web import create_app

SERVICE_NAME = "orphan-scanner"


def include_api(app: FastAPI) -> None:
    """The routes on `app`; what they call comes from `mount_api`."""
    app.include_router(http_reports.router)


def mount_api(app: FastAPI, *, use_cases: OrphanUseCases) -> None:
    """The routes on `app`, calling `use_cases`; the caller's token is checked with the verifier on the app
    (`use_access_tokens` in the entrypoint; `use_access_token_verifier` in tests)."""
    app.state.use_cases = use_cases
    include_api(app)


def openapi_document(version: str) -> dict[str, object]:
    """The read API's document, from the production routes alone: rendering it resolves no dependency (no
    use case, no verifier, no issuer, no database)."""
    app = create_app(SERVICE_NAME, version)
    include_api(app)
    return app.openapi()
