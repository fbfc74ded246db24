from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path

from signal_watcher.entrypoints.api import openapi_document

OPENAPI_FILE = Path(__file__).resolve().parents[3] / "schemas" / "openapi" / "signal-watcher.v1.json"


def test_published_openapi_file_matches_the_app() -> None:
    document = openapi_document(importlib.metadata.version("signal-watcher"))
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if os.environ.get("SIGNAL_WRITE_OPENAPI") == "1":
        OPENAPI_FILE.write_text(text, encoding="utf-8")
    assert OPENAPI_FILE.read_text(encoding="utf-8") == text, "signal-watcher.v1.json differs from the app"


def test_every_route_is_documented() -> None:
    paths = openapi_document("0")["paths"]
    assert set(paths) == {
        "/v1/signal-watchers",
        "/v1/signal-watchers:test",
        "/v1/signal-watchers/{watcher_id}",
        "/v1/signal-watchers/{watcher_id}/status",
        "/v1/signal-watchers/{watcher_id}/checks",
        "/v1/signal-watchers/{watcher_id}/check",
        "/v1/signal-watchers/{watcher_id}/test",
        "/v1/admin/signal-watchers",
    }
