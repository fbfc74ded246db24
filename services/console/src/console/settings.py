"""console settings: environment variables prefixed `CONSOLE_`, validated at start-up.

The console keeps no database. Users sign in at an OpenID provider (authorization code + PKCE):

- ``CONSOLE_OIDC_ISSUER``: the provider, exactly as its tokens' ``iss`` (https, or http on a loopback
  address: `yovision_platform.web.checked_url`); its endpoints come from its discovery document;
- ``CONSOLE_OIDC_CLIENT_ID`` and ``CONSOLE_OIDC_CLIENT_SECRET_FILE``: the console's client there
  (``client_secret_basic``);
- ``CONSOLE_OIDC_AUDIENCES``: what a sign-in asks the access token to be for (default: the five services'
  names, which Hydra and Keycloak issue; a provider with one audience per token, such as Auth0, gets its
  API's identifier, which the services then take as their audience);
- ``CONSOLE_OIDC_PERMISSIONS_CLAIM`` and ``CONSOLE_OIDC_PERMISSIONS_MAP`` (optional): where the user's
  permissions are, as the services' ``<P>AUTH_PERMISSIONS_*`` say (`PermissionMapping`, read from the access
  token the console got from the token endpoint); without them, the granted scopes shaped `service:action`;
- ``CONSOLE_SESSION_KEY_FILE`` (>= 32 bytes hex): the key the session cookies are encrypted with;
- ``CONSOLE_PUBLIC_URL`` (optional): the console's own URL as browsers reach it, when a proxy in front
  makes the request's URL another one; without it the request's own URL is used;
- ``CONSOLE_REFRESH_MARGIN_SECONDS``: how long before its expiry an access token is refreshed;
- ``CONSOLE_DEV_LOGIN_ADMIN_URL`` (local stack only, set by ``make secrets``): the provider's admin API on a
  loopback address. With it, the console serves the provider's login, consent and logout pages (the dev
  login: pick a user id and permissions). It needs a loopback issuer too, so a production configuration
  cannot turn it on.

It calls the five services at ``CONSOLE_<SERVICE>_URL`` with the signed-in user's own access token. A
service URL is https, or plain http to a loopback address or to a host named in ``CONSOLE_PLAIN_HTTP_HOSTS``
(JSON list; empty by default): an operator's statement that those names live on a private network (a
compose network, a cluster's service network) where the users' tokens may travel unencrypted. Nothing else
goes over plain http.

``CONSOLE_JAEGER_URL`` (optional): the base of Jaeger's query HTTP API (`/api/traces`), under the same rule
(https, or plain http to loopback or a host of ``CONSOLE_PLAIN_HTTP_HOSTS``). With it, operators who may
read the audit trail see the traces of a device, a material and an audit row, drawn as a waterfall
(`/traces/<trace id>`). The console sends Jaeger no user token: Jaeger's query API has no authentication of
its own, so it must not be reachable by the users themselves. Without it, no trace link is shown.

``CONSOLE_PROMETHEUS_URL`` (optional; the stack's Prometheus in the local stack): the Prometheus whose
alerts (``/api/v1/alerts``, no credential sent) the overview lists; the same rules as the services' URLs.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from yovision_platform.errors import ConfigError
from yovision_platform.security import load_key_file
from yovision_platform.settings import BaseWebSettings, Port, is_loopback_host, read_secret_file
from yovision_platform.web import AUDIENCES, PermissionMapping, checked_url

DEFAULT_HTTP_PORT = 18080
DEFAULT_ASSETS_DIR = Path(__file__).resolve().parents[2] / "node_modules"
PLAIN_HTTP_HOSTS_MAX = 16
URL_MAX_CHARS = 512
CLIENT_ID_MAX_CHARS = 128
CLIENT_SECRET_MIN_CHARS = 32
REFRESH_MARGIN_SECONDS_DEFAULT = 60
REFRESH_MARGIN_SECONDS_MIN = 10
# An access token of the local provider lives 15 minutes (infra/hydra/hydra.yml): a margin above that
# refreshes on every request, which the end-to-end tests use to prove refreshing; nothing longer is useful.
REFRESH_MARGIN_SECONDS_MAX = 3600
HOST_NAME = re.compile(
    r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"
)
CLIENT_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
AUDIENCES_MAX = 8
AUDIENCE = re.compile(r"[!-~]{1,256}")  # printable ASCII without a space (the request joins them with one)
# The identity settings before OpenID Connect (shared HS256 keys, Sense's operator token): refused by name,
# so an old env file is fixed rather than half-read.
RETIRED_SETTINGS = (
    "CONSOLE_DEV_SIGN_IN",
    "CONSOLE_DEV_JWT_ISSUER",
    "CONSOLE_DEV_JWT_KEY_FILES",
    "CONSOLE_AUTH_JWT_KEY_FILE",
    "CONSOLE_AUTH_JWT_ISSUER",
    "CONSOLE_SENSE_API_TOKEN_FILE",
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
    service_names: ClassVar[tuple[str, ...]] = (
        "sense-reconciler",
        "orphan-scanner",
        "bell-receiver",
        "signal-watcher",
        "media-worker",
    )

    http_port: Port = DEFAULT_HTTP_PORT
    session_key_file: Path
    oidc_issuer: str = Field(min_length=1, max_length=URL_MAX_CHARS)
    oidc_client_id: str = Field(min_length=1, max_length=CLIENT_ID_MAX_CHARS)
    oidc_client_secret_file: Path
    oidc_audiences: Annotated[tuple[str, ...], NoDecode] = AUDIENCES
    oidc_permissions_claim: str | None = Field(default=None, min_length=1, max_length=128)
    oidc_permissions_map: dict[str, frozenset[str]] | None = None
    dev_login_admin_url: str | None = Field(default=None, max_length=URL_MAX_CHARS)
    public_url: str | None = Field(default=None, max_length=URL_MAX_CHARS)
    refresh_margin_seconds: int = Field(
        default=REFRESH_MARGIN_SECONDS_DEFAULT, ge=REFRESH_MARGIN_SECONDS_MIN, le=REFRESH_MARGIN_SECONDS_MAX
    )
    # Before the URLs: their validator reads it.
    plain_http_hosts: tuple[str, ...] = Field(default=(), max_length=PLAIN_HTTP_HOSTS_MAX)
    sense_url: str
    orphan_url: str
    bell_url: str
    signal_url: str
    media_url: str
    jaeger_url: str | None = Field(default=None, max_length=URL_MAX_CHARS)
    prometheus_url: str | None = Field(default=None, max_length=URL_MAX_CHARS)
    assets_dir: Path = DEFAULT_ASSETS_DIR
    api_timeout_seconds: float = Field(default=10.0, gt=0, le=60)

    _session_key: bytes = PrivateAttr(default=b"")
    _client_secret: str = PrivateAttr(default="")

    @model_validator(mode="before")
    @classmethod
    def _no_retired_setting(cls, data: object) -> object:
        for name in RETIRED_SETTINGS:
            if name in os.environ:
                raise ConfigError(name, "retired", "removed: the console signs in with OpenID Connect")
        return data

    @field_validator("oidc_issuer", "public_url")
    @classmethod
    def _own_url(cls, value: str | None) -> str | None:
        return None if value is None else checked_url(value)

    @field_validator("public_url")
    @classmethod
    def _bare_origin(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.path not in ("", "/") or parts.query or parts.fragment:
                raise ValueError("must be scheme://host[:port] (the console serves from its root)")
        return None if value is None else value.rstrip("/")

    @field_validator("oidc_client_id")
    @classmethod
    def _client_id(cls, value: str) -> str:
        if CLIENT_ID.fullmatch(value) is None:
            raise ValueError("letters, digits and . _ : @ - only")
        return value

    @field_validator("oidc_audiences", mode="before")
    @classmethod
    def _audience_list(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip() for part in value.split(","))
        return value

    @field_validator("oidc_audiences")
    @classmethod
    def _audiences(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not 0 < len(value) <= AUDIENCES_MAX or not all(
            AUDIENCE.fullmatch(a) and "," not in a for a in value
        ):
            raise ValueError(f"1..{AUDIENCES_MAX} audiences, comma-separated, each printable without spaces")
        return value

    @field_validator("oidc_permissions_claim")
    @classmethod
    def _claim(cls, value: str | None) -> str | None:
        if value is not None:
            PermissionMapping(value)
        return value

    @field_validator("oidc_permissions_map")
    @classmethod
    def _grants(cls, value: dict[str, frozenset[str]] | None) -> dict[str, frozenset[str]] | None:
        PermissionMapping(grants=value)
        return value

    @field_validator("dev_login_admin_url")
    @classmethod
    def _loopback_admin(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or parts.username or parts.password or parts.query:
            raise ValueError("must be http(s)://host[:port] without credentials or query")
        if not is_loopback_host(parts.hostname):
            raise ValueError("the provider's admin API is reached on a loopback address only")
        return value.rstrip("/")

    @field_validator(
        "sense_url", "orphan_url", "bell_url", "signal_url", "media_url", "jaeger_url", "prometheus_url"
    )
    @classmethod
    def _service_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
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
    def _a_map_names_its_claim(self) -> ConsoleSettings:
        if self.oidc_permissions_map is not None and self.oidc_permissions_claim is None:
            raise ValueError("oidc_permissions_map needs oidc_permissions_claim (the claim it maps)")
        return self

    @model_validator(mode="after")
    def _dev_login_only_with_a_local_provider(self) -> ConsoleSettings:
        if self.dev_login_admin_url is not None and not is_loopback_host(urlsplit(self.oidc_issuer).hostname):
            raise ValueError("dev_login_admin_url needs an issuer on a loopback address (the local stack)")
        return self

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self._session_key = load_key_file(self.session_key_file, self.env_var_name("session_key_file"))
        self._client_secret = read_secret_file(
            self.oidc_client_secret_file,
            self.env_var_name("oidc_client_secret_file"),
            min_bytes=CLIENT_SECRET_MIN_CHARS,
        ).get_secret_value()

    @property
    def session_key(self) -> bytes:
        return self._session_key

    @property
    def client_secret(self) -> str:
        return self._client_secret

    def permission_mapping(self) -> PermissionMapping | None:
        """Where the access token holds the permissions; None: the granted scopes."""
        if self.oidc_permissions_claim is None:
            return None
        return PermissionMapping(self.oidc_permissions_claim, self.oidc_permissions_map)

    @property
    def dev_login(self) -> bool:
        return self.dev_login_admin_url is not None

    def service_urls(self) -> dict[str, str]:
        return {
            "sense-reconciler": self.sense_url,
            "orphan-scanner": self.orphan_url,
            "bell-receiver": self.bell_url,
            "signal-watcher": self.signal_url,
            "media-worker": self.media_url,
        }
