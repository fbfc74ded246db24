"""A private Jaeger for tests and end-to-end environments: the stack's trace server (Jaeger v2, the build of
`infra/scripts/install-jaeger.sh`, copied from the machine's tool cache or built once) with the repo's
`infra/jaeger/jaeger.yml` (in-memory storage), every listener moved to a free loopback port by `--set`
overrides. Nothing it opens listens anywhere but on 127.0.0.1.

    with private_jaeger(tmp_path) as jaeger:
        httpx.post(jaeger.otlp_traces_url, json=otlp_json).raise_for_status()
        trace = jaeger.wait_for_trace(trace_id, spans=3)  # the query API's JSON of that trace

`private_jaeger` yields once the query API answers and both OTLP receivers (HTTP and gRPC) accept
connections, and stops the process (TERM, then KILL) on exit. Its output goes to `work_dir/<label>.log`.
The start blocks (about a second): from async code, enter it in a thread or accept the short block.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from yovision_platform.tools.localhost import free_port, stop_process

__all__ = ["JAEGER_CONFIG", "JaegerNotReadyError", "PrivateJaeger", "jaeger_binary", "private_jaeger"]

REPO_ROOT = Path(__file__).resolve().parents[5]
JAEGER_CONFIG = REPO_ROOT / "infra" / "jaeger" / "jaeger.yml"
INSTALL_SCRIPT = REPO_ROOT / "infra" / "scripts" / "install-jaeger.sh"
INSTALLED_BINARY = REPO_ROOT / ".local" / "bin" / "jaeger"
VERSIONS_FILE = REPO_ROOT / "infra" / "versions.env"
START_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
TRACE_TIMEOUT_SECONDS = 10.0
POLL_SECONDS = 0.1
REQUEST_TIMEOUT_SECONDS = 3.0
HOST = "127.0.0.1"


class JaegerNotReadyError(RuntimeError):
    """The private Jaeger exited, or did not get ready (or did not store a trace) in time."""


@dataclass(frozen=True)
class PrivateJaeger:
    """One running private Jaeger: its loopback ports, its pid and its log."""

    otlp_http_port: int
    otlp_grpc_port: int
    query_http_port: int
    query_grpc_port: int
    metrics_port: int
    pid: int
    log_file: Path

    @property
    def otlp_http_url(self) -> str:
        """The OTLP/HTTP receiver's base (an exporter's `OTEL_EXPORTER_OTLP_ENDPOINT`)."""
        return f"http://{HOST}:{self.otlp_http_port}"

    @property
    def otlp_traces_url(self) -> str:
        """Where OTLP/HTTP traces are posted (protobuf or JSON)."""
        return f"{self.otlp_http_url}/v1/traces"

    @property
    def otlp_grpc_endpoint(self) -> str:
        """The OTLP/gRPC receiver, host:port."""
        return f"{HOST}:{self.otlp_grpc_port}"

    @property
    def otlp_grpc_url(self) -> str:
        return f"http://{self.otlp_grpc_endpoint}"

    @property
    def query_url(self) -> str:
        """The query HTTP API's base (`/api/traces/{id}`, `/api/traces?service=...`, `/api/services`)."""
        return f"http://{HOST}:{self.query_http_port}"

    @property
    def ports(self) -> frozenset[int]:
        """Every port the process listens on."""
        return frozenset(
            (self.otlp_http_port, self.otlp_grpc_port, self.query_http_port, self.query_grpc_port,
             self.metrics_port)
        )  # fmt: skip

    def trace(self, trace_id: str) -> dict[str, Any] | None:
        """The query API's JSON of one trace (`traceID`, `spans`, `processes`), None while it has none."""
        response = httpx.get(f"{self.query_url}/api/traces/{trace_id}", timeout=REQUEST_TIMEOUT_SECONDS)
        if response.status_code == httpx.codes.NOT_FOUND:
            return None
        response.raise_for_status()
        data = response.json().get("data") or []
        return data[0] if data else None

    def wait_for_trace(
        self, trace_id: str, *, spans: int = 1, timeout_seconds: float = TRACE_TIMEOUT_SECONDS
    ) -> dict[str, Any]:
        """The trace once it holds at least `spans` spans (the collector batches: a posted span is stored a
        moment later); JaegerNotReadyError after `timeout_seconds`."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                found = self.trace(trace_id)
                if found is not None and len(found.get("spans", [])) >= spans:
                    return found
            if time.monotonic() > deadline:
                raise JaegerNotReadyError(
                    f"trace {trace_id} with {spans} spans not stored in {timeout_seconds}s"
                )
            time.sleep(POLL_SECONDS)


def jaeger_binary() -> Path:
    """`.local/bin/jaeger` of this checkout, installed first when missing or of another version (from the
    machine's tool cache, else built from its Go module: minutes, once per machine)."""
    match = re.search(r"^JAEGER_MODULE_VERSION=(\S+)$", VERSIONS_FILE.read_text(encoding="utf-8"), re.M)
    stamp = INSTALLED_BINARY.parent / f".jaeger-{match.group(1) if match else 'unpinned'}"
    if not (INSTALLED_BINARY.is_file() and stamp.exists()):
        subprocess.run([str(INSTALL_SCRIPT)], check=True, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    return INSTALLED_BINARY


def _listener_overrides(jaeger: PrivateJaeger) -> dict[str, str]:
    """`--set` values that move every listener of jaeger.yml (tests/deploy checks that these are all)."""
    return {
        "receivers::otlp::protocols::grpc::endpoint": jaeger.otlp_grpc_endpoint,
        "receivers::otlp::protocols::http::endpoint": f"{HOST}:{jaeger.otlp_http_port}",
        "extensions::jaeger_query::http::endpoint": f"{HOST}:{jaeger.query_http_port}",
        "extensions::jaeger_query::grpc::endpoint": f"{HOST}:{jaeger.query_grpc_port}",
        "service::telemetry::metrics::readers": (
            f"[{{pull: {{exporter: {{prometheus: {{host: {HOST}, port: {jaeger.metrics_port}}}}}}}}}]"
        ),
    }


def _accepts_connections(port: int) -> bool:
    with (
        contextlib.suppress(OSError),
        socket.create_connection((HOST, port), timeout=REQUEST_TIMEOUT_SECONDS),
    ):
        return True
    return False


def _ready(jaeger: PrivateJaeger) -> bool:
    with contextlib.suppress(httpx.HTTPError, ValueError):
        services = httpx.get(f"{jaeger.query_url}/api/services", timeout=REQUEST_TIMEOUT_SECONDS)
        # An empty OTLP/JSON request: accepted by a receiver that is up, stores nothing.
        otlp = httpx.post(jaeger.otlp_traces_url, json={"resourceSpans": []}, timeout=REQUEST_TIMEOUT_SECONDS)
        return (
            services.status_code == httpx.codes.OK
            and "data" in services.json()
            and otlp.is_success
            and _accepts_connections(jaeger.otlp_grpc_port)
        )
    return False


@contextlib.contextmanager
def private_jaeger(
    work_dir: Path,
    *,
    binary: Path | None = None,
    label: str = "jaeger",
    overrides: Mapping[str, str] | None = None,
    timeout_seconds: float = START_TIMEOUT_SECONDS,
) -> Iterator[PrivateJaeger]:
    """Start a private Jaeger (`binary`, default `jaeger_binary()`) with jaeger.yml on free loopback ports;
    yield it once ready. `overrides` are more `--set` values (collector config keys joined by `::`), applied
    after the ports. JaegerNotReadyError when the process exits or is not ready within `timeout_seconds`
    (the log's tail in the message). The process is stopped on exit, whatever happened."""
    work_dir.mkdir(parents=True, exist_ok=True)
    executable = binary or jaeger_binary()
    log_file = work_dir / f"{label}.log"
    otlp_http, otlp_grpc, query_http, query_grpc, metrics = (free_port() for _ in range(5))

    def described(pid: int) -> PrivateJaeger:
        return PrivateJaeger(otlp_http, otlp_grpc, query_http, query_grpc, metrics, pid, log_file)

    with log_file.open("wb") as log:
        settings = {**_listener_overrides(described(0)), **(overrides or {})}
        command = [
            str(executable),
            "--config",
            str(JAEGER_CONFIG),
            *(f"--set={k}={v}" for k, v in settings.items()),
        ]
        process = subprocess.Popen(
            command, cwd=work_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            jaeger = described(process.pid)
            deadline = time.monotonic() + timeout_seconds
            while not _ready(jaeger):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_file.read_text(errors="replace")[-3000:]
                    state = f"exited ({process.returncode})" if process.poll() is not None else "not ready"
                    raise JaegerNotReadyError(f"private Jaeger {label} {state} after its start:\n{tail}")
                time.sleep(POLL_SECONDS)
            yield jaeger
        finally:
            stop_process(process, STOP_TIMEOUT_SECONDS)
