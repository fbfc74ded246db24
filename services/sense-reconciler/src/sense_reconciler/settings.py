"""sense-reconciler settings: environment variables prefixed `SENSE_`, validated at start-up.

MediaMTX servers are registered as `yovision_platform.mediamtx` describes (`SENSE_MEDIA_SERVERS`, or
the single-server `SENSE_MEDIAMTX_API_URL` + `SENSE_MEDIAMTX_CREDENTIALS_FILE`); `SENSE_MEDIA_SERVER_DEFAULT`
names the server new sites are assigned to (required with several). Source URIs are encrypted with the key
ring of `yovision_platform.security` (`SENSE_SECRETS_KEY_FILES`, `SENSE_SECRETS_ACTIVE_KEY_ID`); without a
key, start-up is refused.

The audit push to Bell is off by default; `load_audit_push_config` checks its settings
(``SENSE_AUDIT_PUSH_ENABLED``, formerly ``SENSE_BELL_RELAY_ENABLED`` and read by that name until the next
release (docs/migrating.md); ``SENSE_BELL_URL``, ``SENSE_BELL_KEY_FILE``, ``SENSE_BELL_KEY_ID``) with
ConfigErrors naming the setting, never its value.

The Control API takes the OpenID provider's access tokens for the audience `sense-reconciler`
(`yovision_platform.web.AccessTokenSettings`: `SENSE_AUTH_ISSUER` required, `SENSE_AUTH_JWKS_URL`,
`SENSE_AUTH_ALGORITHMS`, `SENSE_AUTH_LEEWAY_SECONDS`, `SENSE_AUTH_PERMISSIONS_CLAIM`,
`SENSE_AUTH_PERMISSIONS_MAP`, `SENSE_AUTH_JWKS_REFRESH_SECONDS`); there is no shared operator token.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from sense_reconciler.domain import limits
from sense_reconciler.domain.audit_push import AuditPushConfig
from yovision_platform.errors import ConfigError
from yovision_platform.mediamtx import MediaServerSettings, validate_media_server_id
from yovision_platform.security import KEY_ID_PATTERN, EncryptionSettings, KeyRing, SigningKey, load_key_file
from yovision_platform.settings import Port, is_loopback_host
from yovision_platform.web import AccessTokenSettings

DEFAULT_HTTP_PORT = 18081
AUDIENCE = "sense-reconciler"  # the `aud` of the access tokens the Control API takes
CONSUMER_GROUP = "sense-reconciler"

SETTING_AUDIT_PUSH_ENABLED = "SENSE_AUDIT_PUSH_ENABLED"
SETTING_BELL_URL = "SENSE_BELL_URL"
SETTING_BELL_KEY_FILE = "SENSE_BELL_KEY_FILE"
SETTING_BELL_KEY_ID = "SENSE_BELL_KEY_ID"


def validate_bell_url(url: str, setting: str = SETTING_BELL_URL) -> str:
    """Bell's base URL (scheme, host, optional port; no path, credentials, query or fragment), returned
    without a trailing slash. ``https`` everywhere; plain ``http`` only for a loopback host. There is no
    way to turn TLS verification off."""
    candidate = url.strip()
    try:
        parts = urlsplit(candidate)
        host = parts.hostname
        _ = parts.port
    except ValueError:
        raise ConfigError(setting, "url_malformed", "not a parseable URL") from None
    if parts.scheme not in {"http", "https"} or not host:
        raise ConfigError(setting, "url_malformed", "must be an https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(setting, "url_has_credentials", "credentials do not belong in the URL")
    if parts.path not in {"", "/"} or parts.query or parts.fragment:
        raise ConfigError(setting, "url_has_path", "give only scheme, host and port")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise ConfigError(setting, "url_not_https", "plain http is allowed only on a loopback host")
    return candidate.rstrip("/")


def load_audit_push_config(
    *,
    enabled: bool,
    bell_url: str | None,
    key_file: str | os.PathLike[str] | None,
    key_id: str | None,
) -> AuditPushConfig | None:
    """``None`` when the push is off; otherwise a validated config with the key loaded (the key file must
    hold at least 32 random bytes as hex, see docs/signing.md). Raises ConfigError naming the setting."""
    if not enabled:
        return None
    required = f"required when {SETTING_AUDIT_PUSH_ENABLED} is true"
    if not bell_url:
        raise ConfigError(SETTING_BELL_URL, "missing", required)
    url = validate_bell_url(bell_url)
    if not key_id:
        raise ConfigError(SETTING_BELL_KEY_ID, "missing", required)
    if KEY_ID_PATTERN.fullmatch(key_id) is None:
        raise ConfigError(
            SETTING_BELL_KEY_ID, "key_id_malformed", "must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}"
        )
    if key_file is None or not os.fspath(key_file):
        raise ConfigError(SETTING_BELL_KEY_FILE, "missing", required)
    secret = load_key_file(key_file, SETTING_BELL_KEY_FILE)
    return AuditPushConfig(bell_url=url, keyring=KeyRing([SigningKey(key_id, secret)], active_key_id=key_id))


class SenseReconcilerSettings(MediaServerSettings, EncryptionSettings, AccessTokenSettings):
    model_config = SettingsConfigDict(
        env_prefix="SENSE_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    audience: ClassVar[str] = AUDIENCE
    renamed_settings: ClassVar[Mapping[str, str]] = {"SENSE_BELL_RELAY_ENABLED": SETTING_AUDIT_PUSH_ENABLED}

    http_port: Port = DEFAULT_HTTP_PORT
    media_server_default: str | None = None
    lease_seconds: float = Field(default=limits.LEASE_SECONDS_DEFAULT, gt=0, le=3600)
    operation_deadline_seconds: float = Field(default=limits.OPERATION_DEADLINE_SECONDS_DEFAULT, gt=0)
    claim_batch: int = Field(default=limits.CLAIM_BATCH_DEFAULT_ITEMS, ge=1, le=limits.CLAIM_BATCH_MAX_ITEMS)
    scan_interval_seconds: float = Field(default=limits.SCAN_INTERVAL_SECONDS_DEFAULT, ge=0.05, le=3600)
    drift_check_seconds: float = Field(
        default=limits.DRIFT_CHECK_SECONDS_DEFAULT, ge=0, le=limits.DRIFT_CHECK_SECONDS_MAX
    )
    # The logical device topic; unset: the catalogue's topic of the device events.
    device_topic: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9._-]{0,199}$")
    consumer_group: str = Field(default=CONSUMER_GROUP, pattern=r"^[a-z0-9][a-z0-9._-]{0,199}$")
    # 0: the partition count the event catalogue declares for the device topic (checked against Kafka).
    device_topic_partitions: int = Field(default=0, ge=0, le=10_000)
    reconciler_enabled: bool = True
    # The signed audit push to Bell: off by default; validated by load_audit_push_config when enabled.
    audit_push_enabled: bool = False
    bell_url: str | None = None
    bell_key_file: Path | None = None
    bell_key_id: str | None = None

    _audit_push: AuditPushConfig | None = PrivateAttr(default=None)

    @field_validator("media_server_default")
    @classmethod
    def _default_server_id_is_valid(cls, value: str | None) -> str | None:
        return None if value is None else validate_media_server_id(value)

    @model_validator(mode="after")
    def _default_server_is_registered(self) -> SenseReconcilerSettings:
        servers = self.media_server_ids
        setting = self.env_var_name("media_server_default")
        if self.media_server_default is None and len(servers) > 1:
            raise ConfigError(setting, "missing", "required with several media servers")
        if self.media_server_default is not None and self.media_server_default not in servers:
            raise ConfigError(setting, "not_registered", "names no registered media server")
        return self

    @property
    def default_media_server(self) -> str:
        """The server new sites are assigned to."""
        return self.media_server_default or min(self.media_server_ids)

    @model_validator(mode="after")
    def _deadline_shorter_than_lease(self) -> SenseReconcilerSettings:
        if self.operation_deadline_seconds >= self.lease_seconds:
            raise ValueError("operation_deadline_seconds must be strictly shorter than lease_seconds")
        return self

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._audit_push = load_audit_push_config(
            enabled=self.audit_push_enabled,
            bell_url=self.bell_url,
            key_file=self.bell_key_file,
            key_id=self.bell_key_id,
        )

    @property
    def audit_push(self) -> AuditPushConfig | None:
        """The validated audit push configuration; None when SENSE_AUDIT_PUSH_ENABLED is false."""
        return self._audit_push
