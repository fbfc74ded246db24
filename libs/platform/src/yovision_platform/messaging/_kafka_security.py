"""How every Kafka client of the platform reaches its brokers: the bootstrap list and the security settings.

One `KafkaConnection` maps the ``<P>_KAFKA_*`` security settings once, into both client libraries: aiokafka
keyword arguments (`KafkaConnection.aiokafka_kwargs`) and a librdkafka configuration
(`KafkaConnection.confluent_config`). Every producer, consumer and admin client the services and tools
create is built from one (see :mod:`yovision_platform.messaging` and :mod:`yovision_platform.messaging`).

Protocols: ``PLAINTEXT`` (default), ``SSL`` (TLS, optionally with a client certificate: mTLS),
``SASL_PLAINTEXT`` and ``SASL_SSL`` (SASL ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``). TLS always
verifies the broker's certificate and host name, against ``<P>_KAFKA_SSL_CA_FILE`` or, without one, the
system trust store (managed Kafka with a public CA). The SASL password is read from a secret file, is
registered with the log redactor, and is never in a repr.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from aiokafka.helpers import create_ssl_context
from pydantic import SecretStr

from yovision_platform.errors import ConfigError

__all__ = [
    "PLAINTEXT",
    "SASL_USERNAME_MAX_CHARS",
    "KafkaConnection",
    "KafkaSecurity",
    "KafkaTarget",
    "SaslMechanism",
    "SecurityProtocol",
    "kafka_connection",
    "kafka_security",
]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SASL_USERNAME_MAX_CHARS = 256
# librdkafka's CA default is the trust store its bundled OpenSSL was built with, which is not the system's
# on a wheel; "probe" searches the usual system locations.
LIBRDKAFKA_SYSTEM_CA = "probe"


@dataclass(frozen=True)
class KafkaSecurity:
    """Validated security settings (build with `kafka_security`). Paths are checked files."""

    protocol: SecurityProtocol = "PLAINTEXT"
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that verifies the broker (certificate and host name)."""
        context: ssl.SSLContext = create_ssl_context(
            cafile=self.ca_file, certfile=self.cert_file, keyfile=self.key_file
        )
        return context

    def aiokafka_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_tls:
            kwargs["ssl_context"] = self.ssl_context()
        if self.uses_sasl and self.sasl_password is not None:
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return kwargs

    def confluent_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"security.protocol": self.protocol.lower()}
        if self.uses_tls:
            config["ssl.ca.location"] = str(self.ca_file) if self.ca_file else LIBRDKAFKA_SYSTEM_CA
            config["ssl.endpoint.identification.algorithm"] = "https"
            if self.cert_file is not None and self.key_file is not None:
                config["ssl.certificate.location"] = str(self.cert_file)
                config["ssl.key.location"] = str(self.key_file)
        if self.uses_sasl and self.sasl_password is not None:
            config["sasl.mechanisms"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username
            config["sasl.password"] = self.sasl_password.get_secret_value()
        return config


PLAINTEXT = KafkaSecurity()


@dataclass(frozen=True)
class KafkaConnection:
    """A Kafka cluster's bootstrap list (``host:port[,host:port...]``) and how to secure the connection."""

    bootstrap: str
    security: KafkaSecurity = PLAINTEXT

    def aiokafka_kwargs(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap, **self.security.aiokafka_kwargs()}

    def confluent_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, **self.security.confluent_config()}

    def first_broker(self) -> tuple[str, int]:
        host, _, port = self.bootstrap.split(",")[0].strip().rpartition(":")
        return host.strip("[]"), int(port)


# A bare bootstrap string is a PLAINTEXT connection (the local stack, tests and benchmarks).
KafkaTarget = KafkaConnection | str


def kafka_connection(target: KafkaTarget) -> KafkaConnection:
    return target if isinstance(target, KafkaConnection) else KafkaConnection(target)


def kafka_security(
    *,
    protocol: SecurityProtocol,
    ca_file: Path | None,
    cert_file: Path | None,
    key_file: Path | None,
    sasl_mechanism: SaslMechanism | None,
    sasl_username: str | None,
    sasl_password_file: Path | None,
    setting: Mapping[str, str],
    read_secret: Callable[[Path, str], SecretStr],
) -> KafkaSecurity:
    """Check a combination of settings, read the password (and check the key) with `read_secret` (the
    secret-file rules of :func:`yovision_platform.settings.read_secret_file`), and return it. `setting` maps
    each argument name to its env var, for the errors.

    ConfigError reasons, besides the secret-file ones: ``missing`` (a SASL protocol without mechanism,
    username or password file; a certificate without its key or the reverse; no such file),
    ``unused_with_protocol`` (SASL settings with a non-SASL protocol, TLS files with a non-TLS one: a
    forgotten protocol would otherwise connect in the clear), ``unreadable``, ``not_a_file`` and
    ``tls_invalid`` (a CA file that does not load as PEM certificates; a client certificate that does not
    load with its key).
    """
    sasl_given = {
        "sasl_mechanism": sasl_mechanism,
        "sasl_username": sasl_username,
        "sasl_password_file": sasl_password_file,
    }
    tls_given = {"ca_file": ca_file, "cert_file": cert_file, "key_file": key_file}
    uses_sasl, uses_tls = KafkaSecurity(protocol).uses_sasl, KafkaSecurity(protocol).uses_tls
    for name, value in sasl_given.items():
        if uses_sasl and value is None:
            raise ConfigError(setting[name], "missing", f"required with security protocol {protocol}")
        if not uses_sasl and value is not None:
            raise ConfigError(setting[name], "unused_with_protocol", "needs a SASL_* security protocol")
    for name, value in tls_given.items():
        if not uses_tls and value is not None:
            raise ConfigError(
                setting[name], "unused_with_protocol", "needs security protocol SSL or SASL_SSL"
            )
    if (cert_file is None) != (key_file is None):
        present, absent = ("cert_file", "key_file") if key_file is None else ("key_file", "cert_file")
        raise ConfigError(setting[absent], "missing", f"required with {setting[present]}")
    if key_file is not None:  # mode and size checks; the key is registered for redaction
        read_secret(key_file, setting["key_file"])
    password = (
        None if sasl_password_file is None else read_secret(sasl_password_file, setting["sasl_password_file"])
    )
    security = KafkaSecurity(protocol, ca_file, cert_file, key_file, sasl_mechanism, sasl_username, password)
    if uses_tls:
        _check_tls_files(security, setting)
    return security


def _check_tls_files(security: KafkaSecurity, setting: Mapping[str, str]) -> None:
    if security.ca_file is not None:
        _check_is_file(security.ca_file, setting["ca_file"])
        try:
            ssl.create_default_context().load_verify_locations(cafile=security.ca_file)
        except ssl.SSLError:
            raise ConfigError(setting["ca_file"], "tls_invalid", "not PEM CA certificates") from None
        except OSError as exc:
            raise ConfigError(
                setting["ca_file"], "unreadable", f"cannot read ({type(exc).__name__})"
            ) from None
    if security.cert_file is not None:
        _check_is_file(security.cert_file, setting["cert_file"])
        try:
            security.ssl_context()
        except (OSError, ValueError):  # ssl.SSLError is an OSError
            raise ConfigError(
                setting["cert_file"], "tls_invalid", "certificate and key do not load as a pair"
            ) from None


def _check_is_file(path: Path, setting: str) -> None:
    if path.is_dir():
        raise ConfigError(setting, "not_a_file", "path is a directory")
    if not path.is_file():
        raise ConfigError(setting, "missing", "file does not exist")
