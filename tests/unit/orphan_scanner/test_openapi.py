from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

from orphan_scanner.entrypoints.api import openapi_document

OPENAPI_FILE = Path(__file__).resolve().parents[3] / "schemas" / "openapi" / "orphan-scanner.v1.json"


def test_published_openapi_file_matches_the_app() -> None:
    """Regenerate with ORPHAN_WRITE_OPENAPI=1."""
    document = openapi_document(importlib.metadata.version("orphan-scanner"))
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if os.environ.get("ORPHAN_WRITE_OPENAPI") == "1":
        OPENAPI_FILE.write_text(text, encoding="utf-8")
    assert OPENAPI_FILE.read_text(encoding="utf-8") == text, "orphan-scanner.v1.json differs from the app"


def test_the_read_api_is_read_only() -> None:
    paths = openapi_document("0")["paths"]
    assert isinstance(paths, dict)
    assert set(paths) == {"/v1/reports", "/v1/reports/latest", "/v1/reports/{scan_id}"}
    assert {method for item in paths.values() for method in item} == {"get"}
