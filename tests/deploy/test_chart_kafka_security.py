"""Kafka security in the chart: `kafka.security` becomes each Kafka-using service's ``<P>_KAFKA_*`` settings,
the password a file of the service's own Secret, the CA and client certificate mounted files; what the chart
renders loads as the settings a service validates at start-up; combinations the services would refuse fail
at render time."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import SettingsConfigDict

from tests.deploy.chart import DATABASE_SETTINGS, containers, env_of, pod_spec, render_text
from tests.deploy.renders import RENDERS, rendered
from tests.deploy.values import values_of
from tests.support.tls import CertificateAuthority
from yovision_platform.messaging import KafkaSecurity
from yovision_platform.settings import BaseServiceSettings, Port, load_settings
from yovision_platform.tools.localhost import write_private_file

SECRET_DIR = "/run/secrets/yovision/"
KAFKA_CA_DIR = "/etc/yovision/kafka-ca/"
KAFKA_TLS_DIR = "/run/secrets/yovision-kafka-tls/"
SASL = {"kafka.security.protocol": "SASL_SSL", "kafka.security.sasl.username": "yovision"}


def kafka_env(name: str, service: str) -> dict[str, str]:
    prefix = DATABASE_SETTINGS[service].model_config.get("env_prefix", "")
    (container,) = containers(rendered(name).deployments()[service])
    return {
        setting.removeprefix(prefix): entry.get("value", "")
        for setting, entry in env_of(container).items()
        if setting.startswith(f"{prefix}KAFKA_") and setting != f"{prefix}KAFKA_PREFIX"
    }


@pytest.mark.parametrize("name", RENDERS)
@pytest.mark.parametrize("service", tuple(DATABASE_SETTINGS))
def test_kafka_security_settings_follow_the_values(name: str, service: str) -> None:
    security = values_of(name)["kafka"]["security"]
    env = kafka_env(name, service)
    deployment = rendered(name).deployments()[service]
    volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
    if security["protocol"] == "PLAINTEXT":
        assert set(env) == {"KAFKA_BOOTSTRAP"}
        assert not {"kafka-ca", "kafka-tls"} & set(volumes)
        return
    assert env["KAFKA_SECURITY_PROTOCOL"] == security["protocol"]
    sasl = security["sasl"]
    assert env["KAFKA_SASL_MECHANISM"] == sasl["mechanism"]
    assert env["KAFKA_SASL_USERNAME"] == sasl["usernames"].get(service, sasl["username"])
    assert env["KAFKA_SASL_PASSWORD_FILE"] == SECRET_DIR + "kafka-sasl-password"
    assert "kafka-sasl-password" in {item["key"] for item in volumes["secrets"]["secret"]["items"]}
    ca = security["caBundle"]
    if ca["configMap"]:
        assert env["KAFKA_SSL_CA_FILE"] == KAFKA_CA_DIR + ca["key"]
        assert volumes["kafka-ca"]["configMap"]["name"] == ca["configMap"]
    else:
        assert "KAFKA_SSL_CA_FILE" not in env and "kafka-ca" not in volumes  # the system trust store
    client = security["clientCertificate"]["secretName"]
    if client:
        assert (env["KAFKA_SSL_CERT_FILE"], env["KAFKA_SSL_KEY_FILE"]) == (
            KAFKA_TLS_DIR + "tls.crt",
            KAFKA_TLS_DIR + "tls.key",
        )
        assert volumes["kafka-tls"]["secret"]["secretName"] == client
    else:
        assert "KAFKA_SSL_CERT_FILE" not in env and "kafka-tls" not in volumes


def test_the_migration_jobs_get_the_same_kafka_settings_and_files() -> None:
    manifest = rendered("production+options")
    for service, job in manifest.migration_jobs().items():
        (serving,) = containers(manifest.deployments()[service])
        (migrate,) = containers(job)
        kafka = {n: e for n, e in env_of(serving).items() if "_KAFKA_" in n}
        assert kafka.items() <= env_of(migrate).items()
        mounts = {m["name"]: m["mountPath"] for m in migrate["volumeMounts"]}
        assert mounts["kafka-ca"] == KAFKA_CA_DIR.rstrip("/") and mounts["kafka-tls"] == KAFKA_TLS_DIR.rstrip(
            "/"
        )


@pytest.mark.parametrize("service", tuple(DATABASE_SETTINGS))
def test_what_the_chart_renders_loads_as_the_services_kafka_settings(service: str, tmp_path: Path) -> None:
    """The rendered env, with the mounted files made real, passes the start-up checks of the service."""

    class Loaded(BaseServiceSettings):
        model_config = SettingsConfigDict(
            env_prefix=DATABASE_SETTINGS[service].model_config.get("env_prefix")
        )
        http_port: Port = 18000

    ca = CertificateAuthority.create(tmp_path, "kafka-ca")
    cert, key = ca.issue(tmp_path, "client")
    files = {
        KAFKA_CA_DIR + "ca.crt": ca.cert,
        KAFKA_TLS_DIR + "tls.crt": cert,
        KAFKA_TLS_DIR + "tls.key": key,
        SECRET_DIR + "kafka-sasl-password": write_private_file(tmp_path / "password", "pw\n"),
    }
    env = kafka_env("production+options", service)
    overrides = {setting.lower(): str(files.get(value, value)) for setting, value in env.items()}
    dsn = write_private_file(tmp_path / "dsn", "postgresql://app:pw@db.example.com:5432/yovision")
    security = load_settings(Loaded, database_dsn_file=dsn, **overrides).kafka.security
    assert security == KafkaSecurity(
        "SASL_SSL",
        ca.cert,
        cert,
        key,
        "SCRAM-SHA-512",
        values_of("production+options")["kafka"]["security"]["sasl"]["usernames"][service],
        security.sasl_password,
    )
    assert security.sasl_password is not None and security.sasl_password.get_secret_value() == "pw"


NEEDS_TLS = "need protocol SSL or SASL_SSL"
MTLS_WITHOUT_TLS = {
    **SASL,
    "kafka.security.protocol": "SASL_PLAINTEXT",
    "kafka.security.clientCertificate.secretName": "c",
}
TWO_CAS = {**SASL, "kafka.security.caBundle.configMap": "a", "kafka.security.caBundle.secret": "b"}


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (
            {"kafka.security.protocol": "SASL_SSL"},
            "kafka.security.sasl.username (or usernames.sense-reconciler)",
        ),
        ({"kafka.security.caBundle.configMap": "kafka-ca"}, NEEDS_TLS),
        (MTLS_WITHOUT_TLS, NEEDS_TLS),
        (TWO_CAS, "not both"),
        ({"kafka.security.protocol": "TLS"}, "/kafka/security/protocol"),
        ({**SASL, "kafka.security.sasl.mechanism": "GSSAPI"}, "/kafka/security/sasl/mechanism"),
        ({**SASL, "kafka.security.sasl.usernames.console": "c"}, "must be one of 'sense-reconciler'"),
    ],
)
def test_values_the_services_would_refuse_fail_the_render(settings: dict[str, str], problem: str) -> None:
    result = render_text(settings=settings)
    assert result.returncode != 0
    assert problem in result.stderr


def test_a_ca_from_a_secret_is_mounted_from_that_secret() -> None:
    result = render_text(settings={**SASL, "kafka.security.caBundle.secret": "kafka-ca"})
    assert result.returncode == 0, result.stderr
    assert "KAFKA_SSL_CA_FILE" in result.stdout and "secretName: kafka-ca" in result.stdout
