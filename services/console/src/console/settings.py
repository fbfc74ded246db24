"""console settings: environment variables prefixed `CONSOLE_`, validated at start-up.

The console keeps no database: sessions are signed cookies (``CONSOLE_SESSION_KEY_FILE``, >= 32 bytes hex).
It calls the five services at ``CONSOLE_<SERVICE>_URL`` and Sense with the operator token of
``CONSOLE_SENSE_API_TOKEN_FILE``. A service URL is https, or plain http to a loopback address or to a host
named in ``CONSOLE_PLAIN_HTTP_HOSTS`` (JSON list; empty by default): an operator's statement that those
names live on a private network (a compose network, a cluster's service network) where the services'
tokens may travel unencrypted. Nothing else goes over plain http.

Identity, one of two ways:

- production: ``CONSOLE_AUTH_JWT_KEY_FILE`` + ``CONSOLE_AUTH_JWT_ISSUER``: the OIDC proxy in front forwards
  the user's bearer token on every request; the console verifies it (audience ``console``) and forwards the
  same token to the services (docs/runbooks/console-behind-oidc.md);
- local stack: ``CONSOLE_DEV_SIGN_IN=true`` (set only by ``make secrets``) shows a sign-in page that mints
  the same dev tokens as ``make dev-token`` with the keys of ``CONSOLE_DEV_JWT_KEY_FILES`` (JSON
  ``{"bell-receiver": "/path/key", ...}``). Off by default.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from yovision_platform.auth import MIN_STATIC_TOKEN_CHARS, TokenVerifier
from yovision_platform.settings import BaseWebSettings, Port, is_loopback_host, read_secret_file
from yovision_platform.signing import load_key_file

DEFAULT_HTTP_PORT = 18080
JWT_AUDIENCE = "console"
JWT_SERVICES = ("orphan-scanner", "bell-receiver", "signal-watcher", "media-worker")
DEFAULT_ASSETS_DIR = Path(__file__).resolve().parents[2] / "node_modules"
PLAIN_HTTP_HOSTS_MAX = 16
HOST_NAME = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
)


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class ConsoleSettings(BaseWebSettings):
    model_config = SettingsConfigDict(
        env_prefix="CONSOLE_", extra="forbid", frozen=True, hide_input_in_errors=True
    )
    service_names: ClassVar[tuple[str, ...]] = ("sense-reconciler", *JWT_SERVICES)

    http_port: Port = DEFAULT_HTTP_PORT
    session_key_file: Path
    # Before the URLs: their validator reads it.
    plain_http_hosts: tuple[str, ...] = Field(default=(), max_length=PLAIN_HTTP_HOSTS_MAX)
    sense_url: str
    sense_api_token_file: Path
    orphan_url: str
    bell_url: str
    signal_url: str
    media_url: str
    assets_dir: Path = DEFAULT_ASSETS_DIR
    auth_jwt_key_file: Path | None = None
    auth_jwt_issuer: str | None = Field(default=None, min_length=1, max_length=128)
    dev_sign_in: bool = False
    dev_jwt_issuer: str = Field(default="yovision-dev", min_length=1, max_length=128)
    dev_jwt_key_files: dict[str, Path] = Field(default_factory=dict)
    api_timeout_seconds: float = Field(default=10.0, gt=0, le=60)

    _session_key: bytes = PrivateAttr(default=b"")
    _sense_token_text: str = PrivateAttr(default="")
    _verifier: TokenVerifier | None = PrivateAttr(default=None)
    _dev_minters: dict[str, TokenVerifier] = PrivateAttr(default_factory=dict)

    @field_validator("sense_url", "orphan_url", "bell_url", "signal_url", "media_url")
    @classmethod
    def _service_url(cls, value: str, info: ValidationInfo) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.query:
            raise ValueError("must be http(s)://host[:port] without credentials or query")
        allowed = info.data.get("plain_http_hosts") or ()
        if parts.scheme == "http" and not is_loopback_host(parts.hostname) and parts.hostname not in allowed:
            raise ValueError("plain http only to loopback or a host of plain_http_hosts; use https")
        return value.rstrip("/")

    @field_validator("plain_http_hosts")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Host names only: no address, no wildcard, so a listed name never widens to a network."""
        for host in value:
            if HOST_NAME.fullmatch(host) is None or _is_ip_address(host):
                raise ValueError(
                    "each entry must be a lower-case DNS host name (not an address or a pattern)"
                )
        return value

    @model_validator(mode="after")
    def _one_identity_source(self) -> ConsoleSettings:
        if (self.auth_jwt_key_file is None) != (self.auth_jwt_issuer is None):
            raise ValueError("auth_jwt_key_file and auth_jwt_issuer are set together or not at all")
        if self.dev_sign_in == (self.auth_jwt_key_file is not None):
            raise ValueError("exactly one of dev_sign_in and auth_jwt_key_file must be configured")
        if self.dev_sign_in and set(self.dev_jwt_key_files) != set(JWT_SERVICES):
            raise ValueError(f"dev_jwt_key_files must name exactly {', '.join(JWT_SERVICES)}")
        return self

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._session_key = load_key_file(self.session_key_file, self.env_var_name("session_key_file"))
        self._sense_token_text = read_secret_file(
            self.sense_api_token_file,
            self.env_var_name("sense_api_token_file"),
            min_bytes=MIN_STATIC_TOKEN_CHARS,
        ).get_secret_value()
        if self.auth_jwt_key_file is not None and self.auth_jwt_issuer is not None:
            self._verifier = TokenVerifier.from_key_file(
                self.auth_jwt_key_file,
                self.env_var_name("auth_jwt_key_file"),
                issuer=self.auth_jwt_issuer,
                audience=JWT_AUDIENCE,
            )
        for service, path in self.dev_jwt_key_files.items():
            self._dev_minters[service] = TokenVerifier.from_key_file(
                path, self.env_var_name("dev_jwt_key_files"), issuer=self.dev_jwt_issuer, audience=service
            )

    @property
    def session_key(self) -> bytes:
        return self._session_key

    @property
    def sense_token(self) -> str:
        return self._sense_token_text

    @property
    def verifier(self) -> TokenVerifier | None:
        return self._verifier

    @property
    def dev_minters(self) -> dict[str, TokenVerifier]:
        return self._dev_minters

    def service_urls(self) -> dict[str, str]:
        return {
            "sense-reconciler": self.sense_url,
            "orphan-scanner": self.orphan_url,
            "bell-receiver": self.bell_url,
            "signal-watcher": self.signal_url,
            "media-worker": self.media_url,
        }
