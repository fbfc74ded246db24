"""The ``<P>_KAFKA_*`` security settings: their combinations, files and limits, and their one mapping into
aiokafka keyword arguments and a librdkafka configuration."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import pytest

from tests.support.tls import CertificateAuthority, self_signed
from tests.unit.platform.demo_settings import DEMO_BOOTSTRAP, DemoSettings, write_secret
from yovision_platform.errors import ConfigError
from yovision_platform.messaging import SASL_USERNAME_MAX_CHARS, KafkaConnection
from yovision_platform.security import redact_text
from yovision_platform.settings import SECRET_FILE_MAX_BYTES, load_settings

PASSWORD = "kafka-sasl-pw-0815"


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path, "ca")


@pytest.fixture
def sasl_ssl(demo_env: pytest.MonkeyPatch, tmp_path: Path, ca: CertificateAuthority) -> pytest.MonkeyPatch:
    demo_env.setenv("DEMO_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    demo_env.setenv("DEMO_KAFKA_SSL_CA_FILE", str(ca.cert))
    demo_env.setenv("DEMO_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    demo_env.setenv("DEMO_KAFKA_SASL_USERNAME", "yovision-sense")
    demo_env.setenv(
        "DEMO_KAFKA_SASL_PASSWORD_FILE", str(write_secret(tmp_path / "sasl.password", PASSWORD + "\n"))
    )
    return demo_env


def refused(**overrides: object) -> tuple[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(DemoSettings, **overrides)
    assert len(caught.value.problems) == 1
    return caught.value.problems[0].setting, caught.value.problems[0].reason


def test_plaintext_is_the_default_and_maps_to_both_clients(demo_env: pytest.MonkeyPatch) -> None:
    kafka = load_settings(DemoSettings).kafka
    assert kafka == KafkaConnection(DEMO_BOOTSTRAP)
    assert kafka.aiokafka_kwargs() == {"bootstrap_servers": DEMO_BOOTSTRAP, "security_protocol": "PLAINTEXT"}
    assert kafka.confluent_config() == {"bootstrap.servers": DEMO_BOOTSTRAP, "security.protocol": "plaintext"}


def test_sasl_ssl_maps_once_into_aiokafka_and_librdkafka(
    sasl_ssl: pytest.MonkeyPatch, ca: CertificateAuthority
) -> None:
    kafka = load_settings(DemoSettings).kafka
    kwargs = kafka.aiokafka_kwargs()
    assert isinstance(kwargs.pop("ssl_context"), ssl.SSLContext)
    assert kwargs == {
        "bootstrap_servers": DEMO_BOOTSTRAP,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "yovision-sense",
        "sasl_plain_password": PASSWORD,
    }
    assert kafka.confluent_config() == {
        "bootstrap.servers": DEMO_BOOTSTRAP,
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(ca.cert),
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "yovision-sense",
        "sasl.password": PASSWORD,
    }


def test_the_ssl_context_verifies_the_broker_and_its_host_name(sasl_ssl: pytest.MonkeyPatch) -> None:
    context = load_settings(DemoSettings).kafka.security.ssl_context()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname


def test_the_password_is_in_no_repr_and_is_registered_for_redaction(sasl_ssl: pytest.MonkeyPatch) -> None:
    settings = load_settings(DemoSettings)
    for text in (repr(settings), str(settings), repr(settings.kafka), repr(settings.kafka.security)):
        assert PASSWORD not in text
    assert PASSWORD not in redact_text(f"connecting with {PASSWORD}")


def test_without_a_ca_file_tls_uses_the_system_trust_store(sasl_ssl: pytest.MonkeyPatch) -> None:
    sasl_ssl.delenv("DEMO_KAFKA_SSL_CA_FILE")
    kafka = load_settings(DemoSettings).kafka
    assert kafka.confluent_config()["ssl.ca.location"] == "probe"
    assert kafka.security.ssl_context().verify_mode is ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    ("protocol", "mechanism"), [("sasl_plaintext", "plain"), ("SASL_SSL", "scram-sha-256")]
)
def test_protocol_and_mechanism_are_case_insensitive(
    sasl_ssl: pytest.MonkeyPatch, protocol: str, mechanism: str
) -> None:
    if protocol == "sasl_plaintext":
        sasl_ssl.delenv("DEMO_KAFKA_SSL_CA_FILE")
    sasl_ssl.setenv("DEMO_KAFKA_SECURITY_PROTOCOL", protocol)
    sasl_ssl.setenv("DEMO_KAFKA_SASL_MECHANISM", mechanism)
    security = load_settings(DemoSettings).kafka.security
    assert (security.protocol, security.sasl_mechanism) == (protocol.upper(), mechanism.upper())


@pytest.mark.parametrize(
    "missing", ["DEMO_KAFKA_SASL_MECHANISM", "DEMO_KAFKA_SASL_USERNAME", "DEMO_KAFKA_SASL_PASSWORD_FILE"]
)
def test_a_sasl_protocol_needs_mechanism_username_and_password_file(
    sasl_ssl: pytest.MonkeyPatch, missing: str
) -> None:
    sasl_ssl.delenv(missing)
    assert refused() == (missing, "missing")


@pytest.mark.parametrize(
    "given", ["DEMO_KAFKA_SASL_MECHANISM", "DEMO_KAFKA_SASL_USERNAME", "DEMO_KAFKA_SASL_PASSWORD_FILE"]
)
def test_sasl_settings_without_a_sasl_protocol_are_refused(sasl_ssl: pytest.MonkeyPatch, given: str) -> None:
    """A forgotten protocol would otherwise connect without the credentials the operator meant to use."""
    sasl_ssl.setenv("DEMO_KAFKA_SECURITY_PROTOCOL", "SSL")
    for name in ("DEMO_KAFKA_SASL_MECHANISM", "DEMO_KAFKA_SASL_USERNAME", "DEMO_KAFKA_SASL_PASSWORD_FILE"):
        if name != given:
            sasl_ssl.delenv(name)
    assert refused() == (given, "unused_with_protocol")


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_tls_files_without_a_tls_protocol_are_refused(sasl_ssl: pytest.MonkeyPatch, protocol: str) -> None:
    sasl_ssl.setenv("DEMO_KAFKA_SECURITY_PROTOCOL", protocol)
    if protocol == "PLAINTEXT":
        for name in (
            "DEMO_KAFKA_SASL_MECHANISM",
            "DEMO_KAFKA_SASL_USERNAME",
            "DEMO_KAFKA_SASL_PASSWORD_FILE",
        ):
            sasl_ssl.delenv(name)
    assert refused() == ("DEMO_KAFKA_SSL_CA_FILE", "unused_with_protocol")


@pytest.mark.parametrize(
    ("value", "setting"), [("TLS", "DEMO_KAFKA_SECURITY_PROTOCOL"), ("GSSAPI", "DEMO_KAFKA_SASL_MECHANISM")]
)
def test_unknown_protocols_and_mechanisms_are_refused_by_name(
    sasl_ssl: pytest.MonkeyPatch, value: str, setting: str
) -> None:
    sasl_ssl.setenv(setting, value)
    name, reason = refused()
    assert (name, reason) == (setting, "literal_error")


def test_a_ca_file_must_exist_be_a_file_and_hold_pem_certificates(
    sasl_ssl: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert refused(kafka_ssl_ca_file=tmp_path / "absent.pem") == ("DEMO_KAFKA_SSL_CA_FILE", "missing")
    assert refused(kafka_ssl_ca_file=tmp_path) == ("DEMO_KAFKA_SSL_CA_FILE", "not_a_file")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    assert refused(kafka_ssl_ca_file=garbage) == ("DEMO_KAFKA_SSL_CA_FILE", "tls_invalid")


def test_mtls_needs_the_certificate_and_its_key(
    sasl_ssl: pytest.MonkeyPatch, tmp_path: Path, ca: CertificateAuthority
) -> None:
    cert, key = ca.issue(tmp_path, "client")
    _, other_key = self_signed(tmp_path, "other")
    assert refused(kafka_ssl_cert_file=cert) == ("DEMO_KAFKA_SSL_KEY_FILE", "missing")
    assert refused(kafka_ssl_key_file=key) == ("DEMO_KAFKA_SSL_CERT_FILE", "missing")
    assert refused(kafka_ssl_cert_file=cert, kafka_ssl_key_file=other_key) == (
        "DEMO_KAFKA_SSL_CERT_FILE",
        "tls_invalid",
    )
    os.chmod(key, 0o644)
    assert refused(kafka_ssl_cert_file=cert, kafka_ssl_key_file=key) == (
        "DEMO_KAFKA_SSL_KEY_FILE",
        "world_accessible",
    )
    os.chmod(key, 0o600)
    config = load_settings(
        DemoSettings, kafka_ssl_cert_file=cert, kafka_ssl_key_file=key
    ).kafka.confluent_config()
    assert (config["ssl.certificate.location"], config["ssl.key.location"]) == (str(cert), str(key))


def test_the_password_file_follows_the_secret_file_rules(
    sasl_ssl: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setting = "DEMO_KAFKA_SASL_PASSWORD_FILE"
    assert refused(kafka_sasl_password_file=tmp_path / "absent") == (setting, "missing")
    assert refused(kafka_sasl_password_file=write_secret(tmp_path / "readable", PASSWORD, 0o644)) == (
        setting,
        "world_accessible",
    )
    assert refused(kafka_sasl_password_file=write_secret(tmp_path / "empty", "\n")) == (setting, "too_short")


@pytest.mark.parametrize(
    ("size", "accepted"),
    [(SECRET_FILE_MAX_BYTES - 1, True), (SECRET_FILE_MAX_BYTES, True), (SECRET_FILE_MAX_BYTES + 1, False)],
)
def test_password_file_size_boundary(
    sasl_ssl: pytest.MonkeyPatch, tmp_path: Path, size: int, accepted: bool
) -> None:
    password_file = write_secret(tmp_path / "big", "p" * size)
    if accepted:
        assert (
            len(
                load_settings(DemoSettings, kafka_sasl_password_file=password_file).kafka.confluent_config()[
                    "sasl.password"
                ]
            )
            == size
        )
    else:
        assert refused(kafka_sasl_password_file=password_file) == (
            "DEMO_KAFKA_SASL_PASSWORD_FILE",
            "too_large",
        )


@pytest.mark.parametrize(
    ("username", "accepted"),
    [
        ("u" * (SASL_USERNAME_MAX_CHARS - 1), True),
        ("u" * SASL_USERNAME_MAX_CHARS, True),
        ("u" * (SASL_USERNAME_MAX_CHARS + 1), False),
        ("a", True),
        ("", False),
        (" padded-secretish", False),
        ("tab\tsecretish", False),
    ],
)
def test_username_boundaries_and_the_value_is_never_echoed(
    sasl_ssl: pytest.MonkeyPatch, username: str, accepted: bool
) -> None:
    if accepted:
        assert (
            load_settings(DemoSettings, kafka_sasl_username=username).kafka.security.sasl_username == username
        )
        return
    with pytest.raises(ConfigError) as caught:
        load_settings(DemoSettings, kafka_sasl_username=username)
    assert caught.value.settings == ("DEMO_KAFKA_SASL_USERNAME",)
    if username:
        assert username not in str(caught.value)
