"""Jaeger's query HTTP API (`CONSOLE_JAEGER_URL`): one trace by id, and the recent traces of a service that
carry an attribute. Its JSON becomes the domain's `Span`s here (attributes already cut to the shown ones).

Jaeger's query API has no authentication: no user token is sent. Every failure (no answer, an error status,
an answer that is not Jaeger's JSON, an answer over `ANSWER_MAX_BYTES`) is `TracesUnavailable`; an unknown
trace is `None`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from console.domain.trace_fields import shown_attributes
from console.domain.waterfall import Span, Trace, TracesUnavailable

# A trace of MAX_SPANS_DRAWN spans with its tags is about 2 MB of Jaeger JSON; beyond this the page would be
# slow to build for nobody's benefit.
ANSWER_MAX_BYTES = 16 * 1024 * 1024
SEARCH_LOOKBACK_SECONDS = 24 * 3600
SEARCH_LIMIT = 20
TIMEOUT_SECONDS = 5.0


@dataclass
class JaegerQuery:
    """The `TraceStore` over Jaeger's query API."""

    base_url: str
    timeout_seconds: float = TIMEOUT_SECONDS
    _http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(timeout=self.timeout_seconds, follow_redirects=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def trace(self, trace_id: str) -> Trace | None:
        status, body = await self._get(f"/api/traces/{trace_id}", {})
        if status == httpx.codes.NOT_FOUND:
            return None
        traces = list(_traces(body))
        return traces[0] if traces else None

    async def search(self, service: str, attributes: Mapping[str, str]) -> list[Trace]:
        # the newest SEARCH_LIMIT traces of the last SEARCH_LOOKBACK_SECONDS
        now_us = int(time.time() * 1_000_000)
        params = {
            "service": service,
            "tags": json.dumps(dict(attributes)),
            "start": str(now_us - SEARCH_LOOKBACK_SECONDS * 1_000_000),
            "end": str(now_us),
            "limit": str(SEARCH_LIMIT),
        }
        _, body = await self._get("/api/traces", params)
        return list(_traces(body))

    async def _get(self, path: str, params: Mapping[str, str]) -> tuple[int, Any]:
        try:
            async with self._http.stream("GET", self.base_url + path, params=params) as response:
                if response.status_code == httpx.codes.NOT_FOUND:
                    return response.status_code, None
                if response.status_code != httpx.codes.OK:
                    raise TracesUnavailable("jaeger_error")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > ANSWER_MAX_BYTES:
                        raise TracesUnavailable("trace_too_large")
        except httpx.HTTPError:
            raise TracesUnavailable("jaeger_unavailable") from None
        try:
            return response.status_code, json.loads(body)
        except ValueError:
            raise TracesUnavailable("jaeger_answer_invalid") from None


def _traces(body: Any) -> Iterator[Trace]:
    if not isinstance(body, dict) or not isinstance(body.get("data"), list | None):
        raise TracesUnavailable("jaeger_answer_invalid")
    try:
        for trace in body.get("data") or ():
            services = {
                key: str(p.get("serviceName", "?")) for key, p in (trace.get("processes") or {}).items()
            }
            yield Trace(str(trace["traceID"]), tuple(_span(s, services) for s in trace.get("spans") or ()))
    except (KeyError, TypeError, ValueError, AttributeError):
        raise TracesUnavailable("jaeger_answer_invalid") from None


def _span(raw: Mapping[str, Any], services: Mapping[str, str]) -> Span:
    tags = {str(t["key"]): t.get("value") for t in raw.get("tags") or ()}
    # a span's parent is its CHILD_OF reference; a span that only FOLLOWS_FROM another hangs under that one
    references = sorted(raw.get("references") or (), key=lambda r: r.get("refType") != "CHILD_OF")
    parent = str(references[0]["spanID"]) if references else None
    error = tags.get("error") in (True, "true") or tags.get("otel.status_code") == "ERROR"
    return Span(
        span_id=str(raw["spanID"]),
        parent_id=parent,
        service=services.get(str(raw.get("processID")), "?"),
        name=str(raw.get("operationName", "")),
        start_us=int(raw["startTime"]),
        duration_us=max(0, int(raw.get("duration", 0))),
        error=error,
        attributes=shown_attributes(tags.items()),
    )
