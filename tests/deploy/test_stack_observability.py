"""The stack's trace and metrics servers (infra/scripts/stack/jaeger.sh, prometheus.sh), each started by the
test on free loopback ports. Prometheus, with the configuration the stack writes, loads and evaluates the
project's alert rules and discovers the service instances `services.sh targets` lists. Jaeger, with
infra/jaeger/jaeger.yml, takes a trace over OTLP/HTTP and gives it back through its query API. Neither listens
anywhere but on 127.0.0.1. The binaries come from their install scripts (a copy from the machine's tool cache,
or a build)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml

from tests.support.prometheus_server import prometheus_binary, prometheus_command
from yovision_platform.tools.jaeger import JAEGER_CONFIG, JaegerNotReadyError, private_jaeger
from yovision_platform.tools.localhost import free_port, stop_process

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "infra" / "scripts"
BIN_DIR = REPO_ROOT / ".local" / "bin"
VERSIONS = (REPO_ROOT / "infra" / "versions.env").read_text()
RULES = REPO_ROOT / "infra" / "prometheus" / "alerts.yml"
SERVICES_LIST = REPO_ROOT / "infra" / "services.list"
TIMEOUT_SECONDS = 15.0
POLL_SECONDS = 0.2
STOP_TIMEOUT_SECONDS = 10.0
TCP_LISTEN = "0A"

T = TypeVar("T")


def pinned(name: str) -> str:
    match = re.search(rf"^{name}=(\S+)$", VERSIONS, re.M)
    assert match is not None, f"{name} is not pinned in infra/versions.env"
    return match.group(1)


def built(tool: str) -> Path:
    subprocess.run([str(SCRIPTS / f"install-{tool}.sh")], check=True, cwd=REPO_ROOT)
    return BIN_DIR / tool


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    return prometheus_binary()


@pytest.fixture(scope="session")
def jaeger_bin() -> Path:
    return built("jaeger")


@contextlib.contextmanager
def running(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
        try:
            yield process
        finally:
            stop_process(process, STOP_TIMEOUT_SECONDS)


def wait_for(what: str, process: subprocess.Popen[bytes], log: Path, check: Callable[[], T | None]) -> T:
    """check()'s first result that is not None (HTTP and decoding errors count as not yet), polled while the
    process lives, for at most TIMEOUT_SECONDS."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            result = check()
            if result is not None:
                return result
        tail = log.read_text(errors="replace")[-3000:]
        assert process.poll() is None, f"{what}: the process exited ({process.returncode}):\n{tail}"
        assert time.monotonic() < deadline, f"{what}: not within {TIMEOUT_SECONDS}s:\n{tail}"
        time.sleep(POLL_SECONDS)


def _address(hex_address: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc/net/tcp{,6} print each 32-bit word of the address in host (little-endian) order.
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(ordered)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(port, 16)


def listeners(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses the process listens on (its sockets matched to /proc/<pid>/net/tcp and tcp6)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    inodes = set()
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(FileNotFoundError):
            target = os.readlink(fd_dir / fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == TCP_LISTEN and fields[9] in inodes:
                ip, port = _address(fields[1])
                found.add((str(ip), port))
    return found


def assert_listens_only_on(process: subprocess.Popen[bytes], ports: set[int]) -> None:
    assert_listens_only_on_pid(process.pid, ports)


def assert_listens_only_on_pid(pid: int, ports: set[int]) -> None:
    found = listeners(pid)
    assert {port for _, port in found} == ports, found
    assert all(ipaddress.ip_address(ip).is_loopback for ip, _ in found), found


def get_json(url: str, **params: str) -> Any:
    response = httpx.get(url, params=params, timeout=3.0)
    response.raise_for_status()
    return response.json()


# Prometheus


def stack_prometheus_config(directory: Path, port: int, targets_file: Path) -> Path:
    """The configuration infra/scripts/stack/prometheus.sh writes at start, for a Prometheus on `port` that
    keeps its files in `directory`."""
    script = (
        'source "$1/lib.sh" && source "$1/stack/prometheus.sh" && '
        'PROMETHEUS_DIR="$2" && PROMETHEUS_PORT="$3" && PROMETHEUS_TARGETS_FILE="$4" && '
        "prometheus_write_config"
    )
    args = [str(SCRIPTS), str(directory), str(port), str(targets_file)]
    subprocess.run(["bash", "-c", script, "bash", *args], check=True, cwd=REPO_ROOT)
    return directory / "prometheus.yml"


def service_env_dir(root: Path) -> tuple[Path, set[tuple[str, str]]]:
    """An environment folder as `make secrets` writes it (each service's HTTP port in env/<service>.env, a
    second sense-reconciler instance in its overlay), and the (job, address) targets it means."""
    env = root / "env"
    env.mkdir(parents=True)
    expected = set()
    names = [line.split()[0] for line in SERVICES_LIST.read_text().splitlines() if line and line[0] != "#"]
    for name in names:
        port = free_port()
        (env / f"{name}.env").write_text(f"X_HTTP_PORT={port}\n")
        expected.add((name, f"127.0.0.1:{port}"))
    second = free_port()
    (env / "sense-reconciler@2.env").write_text(f"SENSE_HTTP_PORT={second}\n")
    expected.add(("sense-reconciler", f"127.0.0.1:{second}"))
    return root, expected


def test_an_instance_without_its_env_file_is_a_target_on_the_port_of_the_services_list(
    tmp_path: Path,
) -> None:
    """Before `make secrets` has written a service's env file, its port is the one of infra/services.list
    (the script ended with status 2 and no message instead)."""
    env_dir, expected = service_env_dir(tmp_path / "stack")
    name, listed_port = SERVICES_LIST.read_text().splitlines()[-1].split()[:2]
    (env_dir / "env" / f"{name}.env").unlink()
    targets_file = tmp_path / "services.json"
    subprocess.run(
        ["bash", str(SCRIPTS / "services.sh"), "targets", str(targets_file)],
        check=True,
        env={**os.environ, "YOVISION_ENV_DIR": str(env_dir)},
    )
    found = {(group["labels"]["job"], target) for group in json.loads(targets_file.read_text())
             for target in group["targets"]}  # fmt: skip
    assert (name, f"127.0.0.1:{listed_port}") in found
    assert found == {(job, address) for job, address in expected if job != name} | {
        (name, f"127.0.0.1:{listed_port}")
    }


def test_prometheus_is_the_pinned_version(prometheus_bin: Path) -> None:
    result = subprocess.run([str(prometheus_bin), "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.startswith(f"prometheus, version {pinned('PROMETHEUS_VERSION')} "), result.stdout


def test_prometheus_evaluates_the_alert_rules_and_discovers_the_services(
    prometheus_bin: Path, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    targets_file = tmp_path / "services.json"
    env_dir, expected_targets = service_env_dir(tmp_path / "stack")
    subprocess.run(
        ["bash", str(SCRIPTS / "services.sh"), "targets", str(targets_file)],
        check=True,
        env={**os.environ, "YOVISION_ENV_DIR": str(env_dir)},
    )
    config = stack_prometheus_config(tmp_path, port, targets_file)
    groups = yaml.safe_load(RULES.read_text())["groups"]
    expected_rules = {g["name"]: [r["alert"] for r in g["rules"]] for g in groups}
    assert "YovisionConsumerStalled" in {name for names in expected_rules.values() for name in names}

    command = prometheus_command(prometheus_bin, config, port, tmp_path / "data")
    with running(command, tmp_path / "prometheus.log") as process:

        def evaluated() -> list[Any] | None:
            loaded = get_json(f"{url}/api/v1/rules", type="alert")["data"]["groups"]
            rules = [r for g in loaded for r in g["rules"]]
            return loaded if rules and all(r["health"] != "unknown" for r in rules) else None

        loaded = wait_for("the alert rules evaluated", process, tmp_path / "prometheus.log", evaluated)
        assert {g["name"]: [r["name"] for r in g["rules"]] for g in loaded} == expected_rules
        assert {g["file"] for g in loaded} == {str(RULES)}
        assert [(r["name"], r["health"], r.get("lastError", "")) for g in loaded for r in g["rules"]] == [
            (name, "ok", "") for names in expected_rules.values() for name in names
        ]

        def discovered() -> set[tuple[str, str]] | None:
            active = get_json(f"{url}/api/v1/targets", state="active")["data"]["activeTargets"]
            services = [t["labels"] for t in active if t["scrapePool"] == "services"]
            # One file is one discovery: every target of it at once.
            return {(labels["job"], labels["instance"]) for labels in services} or None

        found = wait_for("the services' targets", process, tmp_path / "prometheus.log", discovered)
        assert found == expected_targets
        assert_listens_only_on(process, {port})


# Jaeger


def listener_settings(node: Any, path: str = "") -> dict[str, str]:
    """Every `endpoint` (host:port) and `host` value of a collector configuration, by its key path."""
    found: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            child = f"{path}::{key}" if path else str(key)
            if key in ("endpoint", "host") and isinstance(value, str):
                found[child] = value
            else:
                found.update(listener_settings(value, child))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found.update(listener_settings(item, f"{path}[{index}]"))
    return found


def test_every_listener_of_the_jaeger_config_is_on_loopback() -> None:
    settings = listener_settings(yaml.safe_load(JAEGER_CONFIG.read_text()))
    assert set(settings) == {
        "extensions::jaeger_query::http::endpoint",
        "extensions::jaeger_query::grpc::endpoint",
        "receivers::otlp::protocols::grpc::endpoint",
        "receivers::otlp::protocols::http::endpoint",
        "service::telemetry::metrics::readers[0]::pull::exporter::prometheus::host",
    }
    hosts = {key: value.rsplit(":", 1)[0] for key, value in settings.items()}
    assert hosts == dict.fromkeys(settings, "127.0.0.1")


def test_jaeger_is_the_pinned_version(jaeger_bin: Path) -> None:
    result = subprocess.run([str(jaeger_bin), "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.split()[-1] == f"v{pinned('JAEGER_VERSION')}", result.stdout


def otlp_trace(service: str, trace_id: str) -> dict[str, Any]:
    """One span of `service` in OTLP/JSON."""
    start = time.time_ns()
    span = {
        "traceId": trace_id,
        "spanId": secrets.token_hex(8),
        "name": "probe",
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_000_000),
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}


def test_jaeger_stores_an_otlp_trace_and_serves_it_on_its_query_api(jaeger_bin: Path, tmp_path: Path) -> None:
    service = f"probe-{secrets.token_hex(4)}"
    trace_id = secrets.token_hex(16)
    with private_jaeger(tmp_path, binary=jaeger_bin) as jaeger:
        assert service not in (get_json(f"{jaeger.query_url}/api/services")["data"] or [])
        response = httpx.post(jaeger.otlp_traces_url, json=otlp_trace(service, trace_id), timeout=3.0)
        response.raise_for_status()

        trace = jaeger.wait_for_trace(trace_id)
        assert trace["traceID"] == trace_id
        processes = trace["processes"]
        spans = [(s["operationName"], processes[s["processID"]]["serviceName"]) for s in trace["spans"]]
        assert spans == [("probe", service)]
        assert service in get_json(f"{jaeger.query_url}/api/services")["data"]
        assert_listens_only_on_pid(jaeger.pid, set(jaeger.ports))


def test_a_private_jaeger_that_exits_at_start_fails_at_once_with_its_log(tmp_path: Path) -> None:
    started = time.monotonic()
    with (
        pytest.raises(JaegerNotReadyError, match=r"exited \(1\)"),
        private_jaeger(tmp_path, binary=Path("/bin/false")),
    ):
        pass
    assert time.monotonic() - started < 5.0
