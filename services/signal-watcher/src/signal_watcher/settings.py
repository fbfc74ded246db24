"""signal-watcher settings: environment variables prefixed `SIGNAL_`.

Start-up is refused without both secret files:

- ``SIGNAL_SECRETS_AES_KEY_FILE``: hex of exactly 32 random bytes, the AES-256-GCM key that encrypts watcher
  headers and bodies at rest. There is no built-in default key.
- ``SIGNAL_AUTH_JWT_KEY_FILE`` + ``SIGNAL_AUTH_JWT_ISSUER``: the JWT key of the user API (audience
  ``signal-watcher``).

Nothing here can loosen the SSRF guard: the probe client's address policy is not configurable.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, PrivateAttr
from pydantic_settings import SettingsConfigDict

from signal_watcher.adapters.crypto import SecretCipher
from yovision_platform.auth import JwtIdentitySettings
from yovision_platform.errors import ConfigError
from yovision_platform.settings import Port

DEFAULT_HTTP_PORT = 18084
JWT_AUDIENCE = "signal-watcher"
DEFAULT_CHECK_RETENTION_DAYS = 90
DEFAULT_MAX_WATCHERS_PER_USER = 100


def effective_retention_days(configured: int) -> int:
    """A non-positive retention falls back to the default (90 days)."""
    return configured if configured > 0 else DEFAULT_CHECK_RETENTION_DAYS


class SignalWatcherSettings(JwtIdentitySettings):
    model_config = SettingsConfigDict(
        env_prefix="SIGNAL_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
    jwt_audience: ClassVar[str] = JWT_AUDIENCE
    secrets_aes_key_file: Path
    check_retention_days: int = DEFAULT_CHECK_RETENTION_DAYS
    max_watchers_per_user: int = Field(default=DEFAULT_MAX_WATCHERS_PER_USER, ge=1, le=100_000)
    scheduler_enabled: bool = True

    _cipher: SecretCipher | None = PrivateAttr(default=None)

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._cipher = SecretCipher.from_key_file(
            self.secrets_aes_key_file, self.env_var_name("secrets_aes_key_file")
        )

    @property
    def cipher(self) -> SecretCipher:
        if self._cipher is None:
            raise ConfigError(self.env_var_name("secrets_aes_key_file"), "not_loaded", "key not read yet")
        return self._cipher
