"""bell-receiver settings: environment variables prefixed `BELL_`.

Besides the shared settings, Bell refuses to start without:

- ``BELL_AUDIT_PUSH_KEY_FILES``: JSON ``{"key_id": "/path/to/key"}``, the audit push keys (HMAC) Sense may
  sign with. Several key ids are allowed at once so a key can be rotated without downtime
  (docs/runbooks/rotating-keys.md). Its former name ``BELL_RELAY_KEY_FILES`` is read until the next release
  (docs/migrating.md).
- ``BELL_AUTH_ISSUER``: the OpenID provider whose access tokens (audience ``bell-receiver``) the read APIs
  take (``AccessTokenSettings``: the JWKS, algorithms, leeway and permission mapping settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from pydantic import Field, PrivateAttr
from pydantic_settings import SettingsConfigDict

from yovision_platform.errors import ConfigError
from yovision_platform.security import KeyRing
from yovision_platform.settings import Port
from yovision_platform.web import AccessTokenSettings

DEFAULT_HTTP_PORT = 18083
AUDIENCE = "bell-receiver"


class BellReceiverSettings(AccessTokenSettings):
    model_config = SettingsConfigDict(
        env_prefix="BELL_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    audience: ClassVar[str] = AUDIENCE
    renamed_settings: ClassVar[Mapping[str, str]] = {"BELL_RELAY_KEY_FILES": "BELL_AUDIT_PUSH_KEY_FILES"}
    http_port: Port = DEFAULT_HTTP_PORT
    audit_push_key_files: dict[str, Path] = Field(min_length=1)

    _audit_push_keyring: KeyRing | None = PrivateAttr(default=None)

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._audit_push_keyring = KeyRing.from_key_files(
            self.audit_push_key_files, self.env_var_name("audit_push_key_files")
        )

    @property
    def audit_push_keyring(self) -> KeyRing:
        """The verify-only ring of Sense's audit push keys (loaded by :meth:`load_secret_files`)."""
        if self._audit_push_keyring is None:
            raise ConfigError(
                self.env_var_name("audit_push_key_files"), "not_loaded", "key files not read yet"
            )
        return self._audit_push_keyring
