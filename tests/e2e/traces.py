"""Reading the e2e environment's traces back from its Jaeger (`LocalEnvironment.jaeger`)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from yovision_platform.tools.environment import LocalEnvironment
from yovision_platform.tools.jaeger import PrivateJaeger

TRACE_TIMEOUT_SECONDS = 60.0


def new_traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def jaeger_of(env: LocalEnvironment) -> PrivateJaeger:
    assert env.jaeger is not None, "the e2e environment is traced"
    return env.jaeger


def spans_by_service(trace: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    processes = {key: process["serviceName"] for key, process in trace["processes"].items()}
    found: dict[str, list[dict[str, Any]]] = {}
    for span in trace["spans"]:
        found.setdefault(processes[span["processID"]], []).append(span)
    return found


def kind_of(span: dict[str, Any]) -> str | None:
    return next((tag["value"] for tag in span["tags"] if tag["key"] == "span.kind"), None)


async def trace_with(
    env: LocalEnvironment, trace_id: str, wanted: dict[str, set[str]]
) -> dict[str, list[dict[str, Any]]] | None:
    """The trace's spans by service once every service of `wanted` has spans of all its operations."""
    trace = await asyncio.to_thread(jaeger_of(env).trace, trace_id)
    if trace is None:
        return None
    found = spans_by_service(trace)
    for service, operations in wanted.items():
        if not operations <= {span["operationName"] for span in found.get(service, [])}:
            return None
    return found
