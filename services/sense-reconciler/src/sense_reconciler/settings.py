"""sense-reconciler settings: environment variables prefixed `SENSE_`, validated at start-up.

MediaMTX servers are registered as `yovision_platform.media_servers` describes (`SENSE_MEDIA_SERVERS`, or
the single-server `SENSE_MEDIAMTX_API_URL` + `SENSE_MEDIAMTX_CREDENTIALS_FILE`); `SENSE_MEDIA_SERVER_DEFAULT`
names the server new sites are assigned to (required with several). Source URIs are encrypted with the key
ring of `yovision_platform.encryption` (`SENSE_SECRETS_KEY_FILES`, `SENSE_SECRETS_ACTIVE_KEY_ID`); without a
key, start-up is refused.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from sense_reconciler.bell_relay.config import RelayConfig, load_relay_config
from sense_reconciler.domain import limits
from yovision_platform.auth import MIN_STATIC_TOKEN_CHARS
from yovision_platform.encryption import EncryptionSettings
from yovision_platform.errors import ConfigError
from yovision_platform.media_servers import MediaServerSettings, validate_media_server_id
from yovision_platform.settings import Port, read_secret_file

DEFAULT_HTTP_PORT = 18081
CONSUMER_GROUP = "sense-reconciler"


class SenseReconcilerSettings(MediaServerSettings, EncryptionSettings):
    model_config = SettingsConfigDict(
        env_prefix="SENSE_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
    media_server_default: str | None = None
    api_token_file: Path
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
    # The signed audit relay to Bell: off by default; validated by bell_relay.config when enabled.
    bell_relay_enabled: bool = False
    bell_url: str | None = None
    bell_key_file: Path | None = None
    bell_key_id: str | None = None

    _api_token: SecretStr | None = PrivateAttr(default=None)
    _bell_relay: RelayConfig | None = PrivateAttr(default=None)

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
        self._api_token = read_secret_file(
            self.api_token_file, self.env_var_name("api_token_file"), min_bytes=MIN_STATIC_TOKEN_CHARS
        )
        self._bell_relay = load_relay_config(
            enabled=self.bell_relay_enabled,
            bell_url=self.bell_url,
            key_file=self.bell_key_file,
            key_id=self.bell_key_id,
        )

    @property
    def bell_relay(self) -> RelayConfig | None:
        """The validated Bell relay configuration; None when SENSE_BELL_RELAY_ENABLED is false."""
        return self._bell_relay

    @property
    def api_token(self) -> SecretStr:
        """The Control API's static bearer token (read by `load_secret_files`)."""
        if self._api_token is None:
            self.load_secret_files()
        assert self._api_token is not None
        return self._api_token
