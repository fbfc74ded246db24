"""Service settings: a pydantic-settings base class, secret files, DSN checks, instance ids.

Contract for services:

- Subclass :class:`BaseServiceSettings`, set ``model_config = SettingsConfigDict(env_prefix="SENSE_")`` and
  give ``http_port`` a default (``http_port: Port = 18081``).
- Build settings once, in the composition root, with :func:`load_settings`. It turns every validation
  failure into one :class:`~yovision_platform.errors.ConfigError` that names each failing env var and a
  reason, never the input value, then reads the secret files the service needs
  (:meth:`BaseServiceSettings.load_secret_files`).
- Secrets never sit in env vars: env vars hold *paths* to secret files. Secret files must be regular files,
  not accessible to "other" (mode ``o-rwx``, e.g. 0600 or 0640), at most :data:`SECRET_FILE_MAX_BYTES`.
  Their content is registered with the log redactor as it is read.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import socket
import ssl
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypeVar
from urllib.parse import parse_qs, urlsplit

from pydantic import BeforeValidator, Field, PrivateAttr, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from yovision_platform.errors import ConfigError, ConfigProblem
from yovision_platform.messaging._kafka_security import (
    SASL_USERNAME_MAX_CHARS,
    KafkaConnection,
    KafkaSecurity,
    SaslMechanism,
    SecurityProtocol,
    kafka_security,
)
from yovision_platform.messaging._naming import KAFKA_PREFIX_PATTERN, KafkaNames
from yovision_platform.observability._metrics import INSTANCE_ID_PATTERN
from yovision_platform.security._redaction import REDACTED, redact_text, register_secret
from yovision_platform.storage._db import Identifier

__all__ = [
    "SECRET_FILE_MAX_BYTES",
    "BaseServiceSettings",
    "BaseWebSettings",
    "LogLevel",
    "Port",
    "generate_instance_id",
    "is_loopback_host",
    "load_settings",
    "process_instance_id",
    "read_dsn_file",
    "read_secret_file",
    "validate_postgres_dsn",
]

SECRET_FILE_MAX_BYTES = 64 * 1024
# How long a consumer remembers processed event ids (yovision_platform.messaging); longer than the
# longest topic retention of infra/topics.toml (30 days), checked against the broker before each prune.
PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT = 60
PROCESSED_EVENTS_RETENTION_DAYS_MAX = 3650
OTHER_ACCESS_MODE_BITS = stat.S_IRWXO
TRACING_ENDPOINT_MAX_CHARS = 512
# One new trace in a hundred: at that share tracing costs the relay and the API nothing measurable, at 1.0
# the relay 78 % of its throughput (docs/benchmarks.md, "Tracing"). The local stack and the tests set 1.0.
TRACING_SAMPLING_RATIO_DEFAULT = 0.01
POSTGRES_DSN_SCHEMES = frozenset({"postgresql", "postgres"})
INSTANCE_ID_HOST_PART_MAX_CHARS = 48
INSTANCE_ID_RANDOM_HEX_CHARS = 6

Port = Annotated[int, Field(ge=1, le=65535)]


def is_loopback_host(host: str | None) -> bool:
    """`localhost` or a loopback address: the one place plain http is allowed for a URL a service trusts
    (a peer's API, an issuer), since nothing leaves the machine."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


LogLevel = Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_upper)]


def read_secret_file(
    path: str | os.PathLike[str], setting_name: str, *, min_bytes: int = 1, register: bool = True
) -> SecretStr:
    """Read a UTF-8 secret file and return its content without one trailing newline.

    Raises ConfigError(setting_name, reason) with reason one of ``missing``, ``not_a_file``,
    ``unreadable``, ``world_accessible``, ``too_large``, ``not_utf8``, ``too_short``. Neither the content
    nor the path appears in the error (a path setting sometimes holds the secret itself by mistake).
    """
    if not os.fspath(path):
        raise ConfigError(setting_name, "missing", "no file path given")
    try:
        # O_NONBLOCK: opening a FIFO must not hang start-up; fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(setting_name, "missing", "file does not exist") from None
    except IsADirectoryError:
        raise ConfigError(setting_name, "not_a_file", "path is a directory") from None
    except OSError as exc:
        raise ConfigError(setting_name, "unreadable", f"cannot open file ({type(exc).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(setting_name, "not_a_file", "not a regular file")
        if info.st_mode & OTHER_ACCESS_MODE_BITS:
            raise ConfigError(
                setting_name, "world_accessible", "file mode grants access to others; chmod o-rwx"
            )
        raw = _read_at_most(fd, SECRET_FILE_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(setting_name, "unreadable", f"cannot read file ({type(exc).__name__})") from None
    finally:
        os.close(fd)
    if len(raw) > SECRET_FILE_MAX_BYTES:
        raise ConfigError(setting_name, "too_large", f"file exceeds {SECRET_FILE_MAX_BYTES} bytes")
    raw = raw.removesuffix(b"\r\n") if raw.endswith(b"\r\n") else raw.removesuffix(b"\n")
    if len(raw) < min_bytes:
        raise ConfigError(setting_name, "too_short", f"need at least {min_bytes} bytes, file has {len(raw)}")
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(setting_name, "not_utf8", "file content is not UTF-8 text") from None
    if register:
        register_secret(content)
    return SecretStr(content)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def validate_postgres_dsn(dsn: str, setting_name: str) -> str:
    """Check a ``postgresql://`` / ``postgres://`` URI DSN names a host and a database; return it stripped.

    Reasons: ``dsn_malformed``, ``dsn_scheme``, ``dsn_missing_host``, ``dsn_missing_database``.
    A unix-socket host may be given as ``?host=/path`` and the database as ``?dbname=``.
    """
    candidate = dsn.strip()
    if not candidate or any(char.isspace() or ord(char) < 0x20 for char in candidate):
        raise ConfigError(setting_name, "dsn_malformed", "empty or contains whitespace/control characters")
    try:
        parts = urlsplit(candidate)
        query = parse_qs(parts.query)
        hostname = parts.hostname
        _ = parts.port  # raises ValueError when the port is not a number in range
    except ValueError:
        raise ConfigError(setting_name, "dsn_malformed", "not a parseable URI") from None
    if parts.scheme.lower() not in POSTGRES_DSN_SCHEMES:
        raise ConfigError(setting_name, "dsn_scheme", "scheme must be postgresql:// or postgres://")
    if not hostname and not query.get("host"):
        raise ConfigError(setting_name, "dsn_missing_host", "DSN names no host")
    if not parts.path.strip("/") and not query.get("dbname"):
        raise ConfigError(setting_name, "dsn_missing_database", "DSN names no database")
    return candidate


def read_dsn_file(path: str | os.PathLike[str], setting_name: str) -> SecretStr:
    """Read a secret file holding one PostgreSQL URI DSN, validate it and return it."""
    content = read_secret_file(path, setting_name)
    return SecretStr(validate_postgres_dsn(content.get_secret_value(), setting_name))


def generate_instance_id(hostname: str | None = None) -> str:
    """``<sanitized hostname>-<6 random hex>``, or ``instance-<hex>`` without a usable hostname.

    The random part keeps two processes on one host (or two pods with a reused name) apart.
    """
    host = socket.gethostname() if hostname is None else hostname
    host_part = re.sub(r"[^a-z0-9]+", "-", host.lower().split(".")[0]).strip("-")
    host_part = host_part[:INSTANCE_ID_HOST_PART_MAX_CHARS].rstrip("-") or "instance"
    instance_id = f"{host_part}-{secrets.token_hex(INSTANCE_ID_RANDOM_HEX_CHARS // 2)}"
    if INSTANCE_ID_PATTERN.fullmatch(instance_id) is None:  # pragma: no cover - sanitizing guarantees it
        raise AssertionError("generated instance id is invalid")
    return instance_id


_instance_ids_by_pid: dict[int, str] = {}


def process_instance_id() -> str:
    """This process's generated instance id: stable for the process's life, new after ``fork``."""
    pid = os.getpid()
    if pid not in _instance_ids_by_pid:
        _instance_ids_by_pid[pid] = generate_instance_id()
    return _instance_ids_by_pid[pid]


class BaseWebSettings(BaseSettings):
    """Settings of every process the shell serves, with or without a database (a stateless web service
    such as the console uses only these). Env vars (prefix ``P_``): ``P_HTTP_HOST``, ``P_HTTP_PORT``,
    ``P_INSTANCE_ID`` (default: generated per process), ``P_LOG_LEVEL``, ``P_METRICS_ENABLED``, and
    ``P_HTTP_TLS_CERT_FILE`` + ``P_HTTP_TLS_KEY_FILE`` (both or neither): the HTTP server then speaks TLS,
    with a PEM certificate chain and its PEM private key (a secret file), for a process reached across
    hosts (Sense's signed push refuses plain HTTP to anything but loopback).

    Tracing (`yovision_platform.observability`): ``P_TRACING_OTLP_ENDPOINT``, the OTLP/HTTP collector's URL
    (spans go to ``<it>/v1/traces``; http or https, no credentials in it; unset: tracing off), and
    ``P_TRACING_SAMPLING_RATIO``, the share of new traces kept (0 to 1; a continued trace follows its
    caller's decision)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)
    # A setting renamed in this release, by its former env var name -> its name now. The former name is
    # still read until the next release (docs/migrating.md); given both with different values, start-up
    # is refused (`renamed_setting_conflict`) rather than one picked silently.
    renamed_settings: ClassVar[Mapping[str, str]] = {}

    http_host: str = "127.0.0.1"
    http_port: Port
    instance_id: str = Field(default_factory=process_instance_id)
    log_level: LogLevel = "INFO"
    metrics_enabled: bool = True
    http_tls_cert_file: Path | None = None
    http_tls_key_file: Path | None = None
    tracing_otlp_endpoint: str | None = None
    tracing_sampling_ratio: float = Field(default=TRACING_SAMPLING_RATIO_DEFAULT, ge=0.0, le=1.0)

    @field_validator("tracing_otlp_endpoint")
    @classmethod
    def _tracing_endpoint_is_a_base_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if (
            len(value) > TRACING_ENDPOINT_MAX_CHARS
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.username is not None
            or parts.query
            or parts.fragment
        ):
            raise ValueError("must be an http(s) base URL without credentials, query or fragment")
        return value

    @field_validator("http_host")
    @classmethod
    def _http_host_is_a_bare_host(cls, value: str) -> str:
        if not value or any(char.isspace() or char in "/@" for char in value):
            raise ValueError("must be a bare host name or IP address")
        return value

    @field_validator("instance_id")
    @classmethod
    def _instance_id_is_valid(cls, value: str) -> str:
        if INSTANCE_ID_PATTERN.fullmatch(value) is None:
            raise ValueError("must match ^[a-z0-9][a-z0-9-]{0,62}$")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        if not cls.renamed_settings:
            return init_settings, env_settings, dotenv_settings, file_secret_settings
        return (
            init_settings,
            _RenamedEnvSource(settings_cls, cls.renamed_settings),
            dotenv_settings,
            file_secret_settings,
        )

    @classmethod
    def env_var_name(cls, field_name: str) -> str:
        """The environment variable that sets ``field_name`` (e.g. ``SENSE_DATABASE_DSN_FILE``)."""
        return f"{cls.model_config.get('env_prefix', '')}{field_name}".upper()

    def load_secret_files(self) -> None:
        """Read and check every secret file this service needs to start. :func:`load_settings` calls it;
        subclasses with secret files override it and call ``super().load_secret_files()``."""
        self._check_http_tls()

    def _check_http_tls(self) -> None:
        """Both TLS files or neither; the key is a secret file; the pair must load as a server context.
        Reasons: ``missing`` (one without the other, or no such certificate file), the secret file reasons
        for the key, ``tls_invalid`` (not PEM, or a certificate that does not match the key)."""
        cert_setting = self.env_var_name("http_tls_cert_file")
        key_setting = self.env_var_name("http_tls_key_file")
        cert, key = self.http_tls_cert_file, self.http_tls_key_file
        if cert is None and key is None:
            return
        if cert is None:
            raise ConfigError(cert_setting, "missing", f"required with {key_setting}")
        if key is None:
            raise ConfigError(key_setting, "missing", f"required with {cert_setting}")
        if not cert.is_file():
            raise ConfigError(cert_setting, "missing", "file does not exist")
        read_secret_file(key, key_setting)  # mode and size checks; the key is registered for redaction
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        except (OSError, ValueError):  # ssl.SSLError is an OSError
            raise ConfigError(
                cert_setting, "tls_invalid", "certificate and key do not load as a pair"
            ) from None


class _RenamedEnvSource(EnvSettingsSource):
    """The environment, with each renamed setting's former name read as its new one when only the former
    is set."""

    def __init__(self, settings_cls: type[BaseSettings], renamed: Mapping[str, str]) -> None:
        self._renamed = renamed
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        env = dict(super()._load_env_vars())
        fold = (lambda name: name) if self.case_sensitive else str.lower
        for former, current in self._renamed.items():
            if fold(former) in env and fold(current) not in env:
                env[fold(current)] = env[fold(former)]
        return env


def renamed_settings_in_use(
    cls: type[BaseWebSettings], environ: Mapping[str, str] | None = None
) -> list[str]:
    """The former names of renamed settings the environment still uses (the shell logs each at start).

    Raises ConfigError when a setting is given by both names with different values."""
    environ = os.environ if environ is None else environ
    in_use = []
    for former, current in cls.renamed_settings.items():
        if former not in environ:
            continue
        if current in environ and environ[current] != environ[former]:
            raise ConfigError(
                current, "renamed_setting_conflict", f"set by both {current} and its former name {former}"
            )
        in_use.append(former)
    return in_use


class BaseServiceSettings(BaseWebSettings):
    """Settings every service with a schema shares. Subclasses set ``env_prefix`` and a default ``http_port``.

    Env vars (with prefix ``P_``), besides :class:`BaseWebSettings`': ``P_KAFKA_BOOTSTRAP`` (required,
    ``host:port[,host:port...]``), ``P_DATABASE_DSN_FILE`` (required, path to the runtime-role DSN),
    ``P_MIGRATION_DSN_FILE`` (optional, path to the owner DSN used only by ``migrate``),
    ``P_OUTBOX_RELAY_ENABLED``, ``P_DATABASE_SCHEMA`` (default: the service's own schema name, e.g.
    ``sense``) and ``P_KAFKA_PREFIX`` (default empty: prefixed to every topic, consumer group and
    transactional id, see :mod:`yovision_platform.messaging`). The last two let several environments share one
    PostgreSQL cluster and one Kafka cluster. ``P_PROCESSED_EVENTS_RETENTION_DAYS`` (default 60, 1..3650):
    how long consumed event ids are kept for deduplication (:mod:`yovision_platform.messaging`).

    Kafka security (:mod:`yovision_platform.messaging`): ``P_KAFKA_SECURITY_PROTOCOL`` (``PLAINTEXT``
    default, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``), ``P_KAFKA_SSL_CA_FILE`` (PEM CA bundle; default: the
    system trust store), ``P_KAFKA_SSL_CERT_FILE`` + ``P_KAFKA_SSL_KEY_FILE`` (mTLS; the key is a secret
    file), ``P_KAFKA_SASL_MECHANISM`` (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``),
    ``P_KAFKA_SASL_USERNAME`` and ``P_KAFKA_SASL_PASSWORD_FILE`` (a secret file). Build clients from
    :attr:`kafka`, never from ``kafka_bootstrap`` alone.
    """

    kafka_bootstrap: str
    database_dsn_file: Path
    migration_dsn_file: Path | None = None
    outbox_relay_enabled: bool = True
    database_schema: str | None = None
    kafka_prefix: str = ""
    processed_events_retention_days: int = Field(
        default=PROCESSED_EVENTS_RETENTION_DAYS_DEFAULT, ge=1, le=PROCESSED_EVENTS_RETENTION_DAYS_MAX
    )
    kafka_security_protocol: Annotated[SecurityProtocol, BeforeValidator(_upper)] = "PLAINTEXT"
    kafka_ssl_ca_file: Path | None = None
    kafka_ssl_cert_file: Path | None = None
    kafka_ssl_key_file: Path | None = None
    kafka_sasl_mechanism: Annotated[SaslMechanism, BeforeValidator(_upper)] | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password_file: Path | None = None

    _database_dsn: SecretStr | None = PrivateAttr(default=None)
    _kafka_security: KafkaSecurity | None = PrivateAttr(default=None)

    @field_validator("kafka_bootstrap")
    @classmethod
    def _kafka_bootstrap_is_host_port_list(cls, value: str) -> str:
        servers = [server.strip() for server in value.split(",")]
        for server in servers:
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError("must be host:port[,host:port...]")
        return ",".join(servers)

    @field_validator("database_schema")
    @classmethod
    def _database_schema_is_an_identifier(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                Identifier(value)
            except ValueError:
                raise ValueError("must match ^[a-z_][a-z0-9_]{0,62}$") from None
        return value

    @field_validator("kafka_prefix")
    @classmethod
    def _kafka_prefix_is_valid(cls, value: str) -> str:
        if KAFKA_PREFIX_PATTERN.fullmatch(value) is None:
            raise ValueError("must be empty or match ^[a-z0-9][a-z0-9._-]{0,62}$")
        return value

    @field_validator("kafka_sasl_username")
    @classmethod
    def _kafka_sasl_username_is_printable(cls, value: str | None) -> str | None:
        if value is not None and (
            not 0 < len(value) <= SASL_USERNAME_MAX_CHARS or not value.isprintable() or value != value.strip()
        ):
            raise ValueError(f"must be 1..{SASL_USERNAME_MAX_CHARS} printable characters, no outer spaces")
        return value

    @property
    def kafka_names(self) -> KafkaNames:
        """This deployment's Kafka names (topics, consumer groups) under ``kafka_prefix``."""
        return KafkaNames(self.kafka_prefix)

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._database_dsn = read_dsn_file(self.database_dsn_file, self.env_var_name("database_dsn_file"))
        self._kafka_security = self._read_kafka_security()

    @property
    def kafka(self) -> KafkaConnection:
        """How this service's Kafka clients connect (security checked and the password read on first use
        if :meth:`load_secret_files` has not run)."""
        if self._kafka_security is None:
            self._kafka_security = self._read_kafka_security()
        return KafkaConnection(self.kafka_bootstrap, self._kafka_security)

    def _read_kafka_security(self) -> KafkaSecurity:
        fields = {
            "ca_file": "kafka_ssl_ca_file",
            "cert_file": "kafka_ssl_cert_file",
            "key_file": "kafka_ssl_key_file",
            "sasl_mechanism": "kafka_sasl_mechanism",
            "sasl_username": "kafka_sasl_username",
            "sasl_password_file": "kafka_sasl_password_file",
        }
        return kafka_security(
            protocol=self.kafka_security_protocol,
            **{name: getattr(self, field_name) for name, field_name in fields.items()},
            setting={name: self.env_var_name(field_name) for name, field_name in fields.items()},
            read_secret=read_secret_file,
        )

    @property
    def database_dsn(self) -> SecretStr:
        """The runtime-role DSN (read on first use if :meth:`load_secret_files` has not run)."""
        if self._database_dsn is None:
            self._database_dsn = read_dsn_file(self.database_dsn_file, self.env_var_name("database_dsn_file"))
        return self._database_dsn

    def read_migration_dsn(self) -> SecretStr:
        """The owner/admin DSN for ``migrate``; ConfigError if its file setting is absent or bad."""
        setting = self.env_var_name("migration_dsn_file")
        if self.migration_dsn_file is None:
            raise ConfigError(setting, "missing", "required by migrate")
        return read_dsn_file(self.migration_dsn_file, setting)


S = TypeVar("S", bound=BaseWebSettings)


def load_settings(cls: type[S], /, **overrides: Any) -> S:
    """Build ``cls`` from the environment (``overrides`` win), then read its secret files.

    Every failure becomes one ConfigError listing each failing env var with a reason code; input values
    never appear in it, and the pydantic exception is not chained (its text would carry them).
    """
    if not cls.model_config.get("env_prefix"):
        raise TypeError(f"{cls.__name__} must set model_config env_prefix (e.g. 'SENSE_')")
    renamed_settings_in_use(cls)
    try:
        settings = cls(**overrides)
    except ValidationError as exc:
        raise ConfigError.from_problems(_problems_from_validation(cls, exc)) from None
    except SettingsError as exc:
        raise ConfigError.from_problems([_problem_from_settings_error(cls, exc)]) from None
    settings.load_secret_files()
    return settings


def _problems_from_validation(cls: type[BaseWebSettings], exc: ValidationError) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    for error in exc.errors(include_url=False, include_context=False, include_input=True):
        location = [str(part) for part in error["loc"]]
        field_name = location[0] if location else "settings"
        setting = cls.env_var_name(field_name) if field_name in cls.model_fields else field_name.upper()
        if len(location) > 1:
            setting += "".join(f"[{part}]" for part in location[1:])
        detail = str(error["msg"])
        value = error.get("input")
        if isinstance(value, str) and value:
            detail = detail.replace(value, REDACTED)
        problems.append(ConfigProblem(setting, str(error["type"]), redact_text(detail)))
    return problems


def _problem_from_settings_error(cls: type[BaseWebSettings], exc: SettingsError) -> ConfigProblem:
    match = re.search(r'field "([^"]+)"', str(exc))
    field_name = match.group(1) if match else "settings"
    setting = cls.env_var_name(field_name) if field_name in cls.model_fields else field_name.upper()
    return ConfigProblem(setting, "unparseable", "value could not be parsed (JSON expected for this setting)")
