"""A private single-node KRaft Kafka with a SASL_SSL listener (SCRAM-SHA-512), for the Kafka security tests.

Same distribution and base configuration as the shared broker (.local/kafka, infra/kafka/server.properties,
see infra/scripts/stack/kafka.sh), but its own data directory, its own free loopback ports, a broker
certificate signed by a throwaway CA and one SCRAM user created at format time (``--add-scram``). Clients
reach it only over SASL_SSL; the broker talks to itself over a PLAINTEXT listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.stack import REPO_ROOT, free_port
from tests.support.tls import CertificateAuthority
from yovision_platform.messaging import KafkaConnection, KafkaSecurity, admin_client
from yovision_platform.tools.kafka_cluster import cluster_id
from yovision_platform.tools.localhost import write_private_file

KAFKA_HOME = REPO_ROOT / ".local" / "kafka"
BASE_CONFIG = REPO_ROOT / "infra" / "kafka" / "server.properties"
LOG4J_CONFIG = REPO_ROOT / "infra" / "kafka" / "log4j2.xml"
TOOLS_LOG4J_CONFIG = REPO_ROOT / "infra" / "kafka" / "tools-log4j2.xml"
JAVA_OPTS = [
    "-Xms128m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
]
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 30.0
MECHANISM = "SCRAM-SHA-512"
# Settings the private broker replaces in the shared template (listeners, quorum, data dir).
REPLACED_KEYS = ("listeners", "advertised.listeners", "inter.broker.listener.name",
                 "controller.listener.names", "listener.security.protocol.map",
                 "controller.quorum.bootstrap.servers", "log.dirs")  # fmt: skip


@dataclass(frozen=True)
class SecureBroker:
    bootstrap: str
    ca: CertificateAuthority
    username: str
    password_file: Path
    log_file: Path

    def security(self, **overrides: object) -> KafkaSecurity:
        """The SASL_SSL settings that reach this broker (as `kafka_security` would return them)."""
        from yovision_platform.settings import read_secret_file

        fields: dict[str, object] = {
            "protocol": "SASL_SSL",
            "ca_file": self.ca.cert,
            "sasl_mechanism": MECHANISM,
            "sasl_username": self.username,
            "sasl_password": read_secret_file(self.password_file, "test", register=False),
        }
        return KafkaSecurity(**{**fields, **overrides})  # type: ignore[arg-type]

    def connection(self, **overrides: object) -> KafkaConnection:
        return KafkaConnection(self.bootstrap, self.security(**overrides))


def _server_properties(data_dir: Path, ports: dict[str, int], broker_pem: Path) -> str:
    kept = [
        line
        for line in BASE_CONFIG.read_text().splitlines()
        if not any(line.startswith(f"{key}=") for key in REPLACED_KEYS)
    ]
    client, internal, controller = ports["client"], ports["internal"], ports["controller"]
    return "\n".join(
        [
            *kept,
            f"listeners=SASL_SSL://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal},"
            f"CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=SASL_SSL://127.0.0.1:{client},INTERNAL://127.0.0.1:{internal},"
            f"CONTROLLER://127.0.0.1:{controller}",
            "inter.broker.listener.name=INTERNAL",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
            f"log.dirs={data_dir}",
            f"sasl.enabled.mechanisms={MECHANISM}",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={broker_pem}",
            "ssl.client.auth=none",
            "",
        ]
    )


def _java(*args: str, log4j: Path) -> list[str]:
    return ["java", *JAVA_OPTS, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{KAFKA_HOME}/libs/*", *args]


async def _answers(broker: SecureBroker) -> bool:
    admin = admin_client(broker.connection(), client_id="secure-broker-probe")
    try:
        async with asyncio.timeout(5):
            await admin.start()
            await admin.list_topics()
        return True
    except Exception:
        return False
    finally:
        await admin.close()


def _launch(directory: Path) -> tuple[SecureBroker, subprocess.Popen[bytes]]:
    """Write the TLS material, the SCRAM user and the configuration, format the storage, start the broker."""
    tls_dir, data_dir, logs_dir = directory / "tls", directory / "data", directory / "logs"
    for path in (tls_dir, data_dir, logs_dir):
        path.mkdir(parents=True)
    ca = CertificateAuthority.create(tls_dir, "kafka-test-ca")
    cert, key = ca.issue(tls_dir, "broker")
    broker_pem = write_private_file(tls_dir / "broker.pem", key.read_text() + cert.read_text())
    username, password = "relay-user", secrets.token_urlsafe(18)
    password_file = write_private_file(tls_dir / "sasl.password", password + "\n")
    ports = {"client": free_port(), "internal": free_port(), "controller": free_port()}
    config = directory / "server.properties"
    config.write_text(_server_properties(data_dir, ports, broker_pem))
    formatted = subprocess.run(
        _java("kafka.tools.StorageTool", "format", "--standalone", "-t", cluster_id(), "-c", str(config),
              "--add-scram", f"{MECHANISM}=[name={username},password={password}]", log4j=TOOLS_LOG4J_CONFIG),
        check=False, capture_output=True, text=True, timeout=START_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert formatted.returncode == 0, (formatted.stdout + formatted.stderr).replace(password, "<password>")
    log_file = logs_dir / "kafka.out"
    with log_file.open("wb") as out:
        process = subprocess.Popen(
            _java(f"-Dkafka.logs.dir={logs_dir}", "kafka.Kafka", str(config), log4j=LOG4J_CONFIG),
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return SecureBroker(f"127.0.0.1:{ports['client']}", ca, username, password_file, log_file), process


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)  # its own session: the broker and nothing else
    try:
        process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.asynccontextmanager
async def secure_broker(directory: Path) -> AsyncIterator[SecureBroker]:
    """Start a private SASL_SSL broker under `directory` once it answers; stop it on exit."""
    broker, process = await asyncio.to_thread(_launch, directory)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not await _answers(broker):
            if process.poll() is not None:
                raise AssertionError(f"the private Kafka exited during start-up (see {broker.log_file})")
            if time.monotonic() > deadline:
                raise AssertionError(f"the private Kafka did not answer in time (see {broker.log_file})")
            await asyncio.sleep(0.5)  # the poll interval of a bounded wait
        yield broker
    finally:
        await asyncio.to_thread(_stop, process)
