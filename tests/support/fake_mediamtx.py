"""A small in-memory MediaMTX Control API v3 (paths only) behind httpx.MockTransport, for unit tests."""

from __future__ import annotations

import json
from typing import Any

import httpx

PREFIX = "/v3/config/paths/"


class FakeMediaMtx:
    def __init__(self) -> None:
        self.paths: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.list_override: list[dict[str, Any]] | None = None

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.calls.append((request.method, path))
        if self.list_override is not None and path == PREFIX + "list":
            page = int(request.url.params["page"])
            return httpx.Response(200, json=self.list_override[page])
        action, _, name = path.removeprefix(PREFIX).partition("/")
        if action == "list":
            return self._list(int(request.url.params["page"]), int(request.url.params["itemsPerPage"]))
        if action == "get":
            if name not in self.paths:
                return httpx.Response(404, json={"status": "error", "error": "path configuration not found"})
            return httpx.Response(200, json={"name": name, **self.paths[name]})
        if action in ("add", "replace"):
            config = json.loads(request.content)
            source = config.get("source", "")
            if not source.startswith(("rtsp://", "rtsps://")):  # MediaMTX's scheme check: lower case only
                return httpx.Response(400, json={"status": "error", "error": f"invalid source: '{source}'"})
            if action == "add" and name in self.paths:
                return httpx.Response(400, json={"status": "error", "error": "path already exists"})
            self.paths[name] = config
            return httpx.Response(200, json={"status": "ok"})
        if action == "delete":
            if self.paths.pop(name, None) is None:
                return httpx.Response(404, json={"status": "error", "error": "path not found"})
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(404)

    def _list(self, page: int, per_page: int) -> httpx.Response:
        names = sorted(self.paths)
        page_count = (len(names) + per_page - 1) // per_page
        chunk = names[page * per_page : (page + 1) * per_page]
        items = [{"name": n, **self.paths[n]} for n in chunk]
        return httpx.Response(200, json={"itemCount": len(names), "pageCount": page_count, "items": items})
