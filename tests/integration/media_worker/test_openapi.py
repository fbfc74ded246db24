from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

from media_worker.entrypoints.api import openapi_document

OPENAPI_FILE = Path(__file__).resolve().parents[3] / "schemas" / "openapi" / "media-worker.v1.json"


def test_published_openapi_file_matches_the_app() -> None:
    text = (
        json.dumps(openapi_document(importlib.metadata.version("media-worker")), indent=2, sort_keys=True)
        + "\n"
    )
    if os.environ.get("MEDIA_WRITE_OPENAPI") == "1":
        OPENAPI_FILE.write_text(text, encoding="utf-8")
    assert OPENAPI_FILE.read_text(encoding="utf-8") == text, "media-worker.v1.json differs from the app"
