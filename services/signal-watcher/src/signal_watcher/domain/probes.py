"""What a probe answers: a completed response, or a failure with a stable code (the probe port's contract,
`service_layer.ports.Probe`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from yovision_platform.errors import PlatformError

__all__ = ["HOSTS_FILE", "ProbeFailed", "ProbeResolver", "ProbeResponse"]

HOSTS_FILE = Path("/etc/hosts")


class ProbeResolver(enum.StrEnum):
    """How a probe resolves a host name (`SIGNAL_PROBE_RESOLVER`; `adapters.resolvers.resolver_of`)."""

    SYSTEM = "system"
    HOSTS_FILE = "hosts_file"


class ProbeFailed(PlatformError):
    """A probe that produced no judgeable response (not a refusal of the API: a check records it). `code`
    is stable and safe to store and show: timeout, too_large, redirect, connect_refused, connect_failed,
    dns, ssrf_blocked, probe_network_confined, url_refused, tls, protocol_error."""

    code = "probe_failed"


@dataclass(frozen=True)
class ProbeResponse:
    status_code: int
    body: bytes
    duration_ms: int
