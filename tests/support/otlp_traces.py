"""A synthetic trace in OTLP/JSON, as the services would export one event's path: a device created on
Sense's API, its outbox relayed to Kafka, Bell and orphan-scanner consuming it, the reconcile loop calling
MediaMTX (one call failing, then retried). For the trace pages' tests and the console's screenshot; posted
to a private Jaeger's `otlp_traces_url` (`yovision_platform.tools.jaeger`)."""

from __future__ import annotations

import time
from typing import Any

import httpx

from yovision_platform.tools.jaeger import PrivateJaeger

__all__ = ["SYNTHETIC_SPANS", "post_synthetic_trace", "synthetic_trace"]

# (span key, parent key, service, name, start ms, duration ms, error)
SYNTHETIC_SPANS: tuple[tuple[str, str | None, str, str, float, float, bool], ...] = (
    ("post", None, "console", "POST /devices", 0.0, 48.0, False),
    ("api", "post", "sense-reconciler", "POST /v1/devices", 2.0, 41.0, False),
    ("insert", "api", "sense-reconciler", "INSERT sense.devices", 5.0, 6.5, False),
    ("outbox", "api", "sense-reconciler", "outbox publish sense.device.v1", 30.0, 9.0, False),
    ("bell", "outbox", "bell-receiver", "sense.device.v1 process", 44.0, 12.0, False),
    ("orphan", "outbox", "orphan-scanner", "sense.device.v1 process", 46.0, 7.0, False),
    ("reconcile", "outbox", "sense-reconciler", "reconcile device", 52.0, 80.0, False),
    ("mtx1", "reconcile", "sense-reconciler", "PATCH mediamtx /v3/config/paths", 55.0, 20.0, True),
    ("mtx2", "reconcile", "sense-reconciler", "PATCH mediamtx /v3/config/paths", 101.0, 18.0, False),
)


def _value(value: str | int) -> dict[str, Any]:
    return {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}


def synthetic_trace(trace_id: str, device_id: str, *, start_ns: int | None = None) -> dict[str, Any]:
    """The OTLP/JSON request body of SYNTHETIC_SPANS under `trace_id`; spans about the device carry
    `yovision.device_id`, the failed MediaMTX call an error status (and a URL with a secret in its query,
    which no page may show)."""
    start = time.time_ns() if start_ns is None else start_ns
    ids = {key: f"{index + 1:016x}" for index, (key, *_) in enumerate(SYNTHETIC_SPANS)}
    by_service: dict[str, list[dict[str, Any]]] = {}
    for key, parent, service, name, start_ms, duration_ms, error in SYNTHETIC_SPANS:
        attributes: dict[str, str | int] = {}
        if service == "sense-reconciler":
            attributes["yovision.device_id"] = device_id
        if key.startswith("mtx"):
            attributes |= {
                "http.request.method": "PATCH",
                "url.full": "http://127.0.0.1:9997/v3/?token=s3cr3t",
            }
            attributes["http.response.status_code"] = 500 if error else 200
        span: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": ids[key],
            "name": name,
            "kind": 2 if parent is None or key in ("api", "bell", "orphan") else 3,
            "startTimeUnixNano": str(start + int(start_ms * 1e6)),
            "endTimeUnixNano": str(start + int((start_ms + duration_ms) * 1e6)),
            "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
        }
        if parent is not None:
            span["parentSpanId"] = ids[parent]
        if error:
            span["status"] = {"code": 2, "message": "mediamtx answered 500"}
        by_service.setdefault(service, []).append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "yovision-test"}, "spans": spans}],
            }
            for service, spans in by_service.items()
        ]
    }


def post_synthetic_trace(jaeger: PrivateJaeger, trace_id: str, device_id: str) -> None:
    """Post the synthetic trace to `jaeger` and wait until its query API serves every span (blocking: from
    async code, in a thread)."""
    response = httpx.post(jaeger.otlp_traces_url, json=synthetic_trace(trace_id, device_id), timeout=5.0)
    response.raise_for_status()
    jaeger.wait_for_trace(trace_id, spans=len(SYNTHETIC_SPANS))
