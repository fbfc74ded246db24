"""signal-watcher settings: environment variables prefixed `SIGNAL_`.

Start-up is refused without an encryption key and the OpenID provider's issuer:

- the key ring that encrypts watcher headers and bodies at rest (AES-256-GCM, yovision_platform.security):
  ``SIGNAL_SECRETS_KEY_FILES`` (JSON ``{"<key id>": "/path"}``) and ``SIGNAL_SECRETS_ACTIVE_KEY_ID`` (the key
  new ciphertexts use; may be left out with one key), and/or the setting from before the ring,
  ``SIGNAL_SECRETS_AES_KEY_FILE``, whose key joins the ring with the id ``legacy`` (active when it is the
  only key). Each file holds the hex of exactly 32 random bytes. There is no built-in default key.
- ``SIGNAL_AUTH_ISSUER``: the issuer whose access tokens the user API takes (verified against its JWKS;
  audience ``signal-watcher``); the other ``SIGNAL_AUTH_*`` settings are those of
  `yovision_platform.web.AccessTokenSettings`.

The one setting that loosens the SSRF guard is ``SIGNAL_PROBE_ALLOWED_NETWORKS``: a comma-separated list of
CIDR networks (e.g. ``127.0.0.0/8``) whose addresses probes may reach although they are not public. It is
empty by default, meant for test and end-to-end environments only, and DANGEROUS anywhere users can create
watchers: every address inside it becomes reachable by every user's probes. A malformed entry, or one with
host bits set (``127.0.0.1/8``), refuses start-up. It is never shown in, nor changeable through, the API.

``SIGNAL_PROBE_ONLY_NETWORKS`` narrows instead: when set (a comma-separated list of CIDR networks, e.g.
``127.0.0.0/8,::1/128``), every address a probe would connect to must also lie inside one of them, public
addresses included (``probe_network_confined``). Unset or empty (the default, production's): no
confinement. Test and end-to-end environments set it (``yovision_platform.tools.environment``), so no test
probe can leave the machine; ``make up``'s dev stack does not (users probe real sites). Parsed and refused
like the allow-list.

``SIGNAL_PROBE_RESOLVER`` says how a probe resolves a host name: ``system`` (the default: getaddrinfo, so a
DNS query for any name the hosts file lacks) or ``hosts_file`` (``/etc/hosts`` alone: no packet is sent, a
name it does not list has no address; ``SIGNAL_PROBE_HOSTS_FILE`` names another file). Test environments set
``hosts_file`` beside the confinement: a fuzzer's made-up host name must not become a DNS query either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BeforeValidator, Field
from pydantic_settings import NoDecode, SettingsConfigDict

from signal_watcher.domain.probes import HOSTS_FILE, ProbeResolver
from signal_watcher.domain.ssrf import AddressGuard, IpNetwork, parse_networks
from yovision_platform.security import EncryptionSettings
from yovision_platform.settings import Port
from yovision_platform.web import AccessTokenSettings

DEFAULT_HTTP_PORT = 18084
AUDIENCE = "signal-watcher"
DEFAULT_CHECK_RETENTION_DAYS = 90
DEFAULT_MAX_WATCHERS_PER_USER = 100
LEGACY_KEY_ID = "legacy"


def effective_retention_days(configured: int) -> int:
    """A non-positive retention falls back to the default (90 days)."""
    return configured if configured > 0 else DEFAULT_CHECK_RETENTION_DAYS


def _networks(value: object) -> object:
    return parse_networks(value) if isinstance(value, str) else value


Networks = Annotated[tuple[IpNetwork, ...], NoDecode, BeforeValidator(_networks)]


class SignalWatcherSettings(AccessTokenSettings, EncryptionSettings):
    model_config = SettingsConfigDict(
        env_prefix="SIGNAL_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
    audience: ClassVar[str] = AUDIENCE
    accept_legacy_ciphertexts: ClassVar[bool] = True
    secrets_aes_key_file: Path | None = None
    check_retention_days: int = DEFAULT_CHECK_RETENTION_DAYS
    max_watchers_per_user: int = Field(default=DEFAULT_MAX_WATCHERS_PER_USER, ge=1, le=100_000)
    scheduler_enabled: bool = True
    probe_allowed_networks: Networks = ()
    probe_only_networks: Networks = ()
    probe_resolver: ProbeResolver = ProbeResolver.SYSTEM
    probe_hosts_file: Path = HOSTS_FILE

    def extra_key_files(self) -> dict[str, tuple[Path, str]]:
        if self.secrets_aes_key_file is None:
            return {}
        return {LEGACY_KEY_ID: (self.secrets_aes_key_file, self.env_var_name("secrets_aes_key_file"))}

    @property
    def probe_guard(self) -> AddressGuard:
        """The address guard of every probe and of create/update/test: the SSRF rule, strict unless networks
        are allow-listed, then the confinement to `probe_only_networks` when set."""
        return AddressGuard(self.probe_allowed_networks, self.probe_only_networks)
