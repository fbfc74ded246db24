"""Relay configuration: limits, and validation of the ``SENSE_BELL_*`` settings.

Errors are :class:`~yovision_platform.errors.ConfigError` naming the setting (``SENSE_BELL_URL``,
``SENSE_BELL_KEY_FILE``, ``SENSE_BELL_KEY_ID``, ``SENSE_BELL_RELAY_ENABLED``), never its value.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from yovision_platform.audit_relay import MAX_BATCH_ITEMS
from yovision_platform.errors import ConfigError
from yovision_platform.signing import KEY_ID_PATTERN, KeyRing, SigningKey, load_key_file

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_CAP_SECONDS",
    "BATCH_MAX_ITEMS",
    "LEASE_SECONDS",
    "REQUEST_DEADLINE_SECONDS",
    "SETTING_ENABLED",
    "SETTING_KEY_FILE",
    "SETTING_KEY_ID",
    "SETTING_URL",
    "RelayConfig",
    "load_relay_config",
    "validate_bell_url",
]

SETTING_ENABLED = "SENSE_BELL_RELAY_ENABLED"
SETTING_URL = "SENSE_BELL_URL"
SETTING_KEY_FILE = "SENSE_BELL_KEY_FILE"
SETTING_KEY_ID = "SENSE_BELL_KEY_ID"

BATCH_MAX_ITEMS = MAX_BATCH_ITEMS
LEASE_SECONDS = 30.0  # DB-clock lease on claimed outbox rows
REQUEST_DEADLINE_SECONDS = 10.0  # whole HTTP exchange; must stay shorter than the lease
LEASE_SAFETY_SECONDS = 5.0  # time left on the lease after the deadline, for the acknowledgement
BACKOFF_BASE_SECONDS = 1.0  # first retry of a failed batch
BACKOFF_CAP_SECONDS = 300.0  # retries never wait longer
POLL_INTERVAL_SECONDS = 0.5  # idle wait when nothing is due
LOOPBACK_HOST_NAMES = frozenset({"localhost"})


def _is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_HOST_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def validate_bell_url(url: str, setting: str = SETTING_URL) -> str:
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
    if parts.scheme == "http" and not _is_loopback(host):
        raise ConfigError(setting, "url_not_https", "plain http is allowed only on a loopback host")
    return candidate.rstrip("/")


@dataclass(frozen=True)
class RelayConfig:
    """A validated relay configuration. Tests shorten ``lease_seconds`` and ``request_deadline_seconds``."""

    bell_url: str
    keyring: KeyRing = field(repr=False)
    batch_size: int = BATCH_MAX_ITEMS
    lease_seconds: float = LEASE_SECONDS
    request_deadline_seconds: float = REQUEST_DEADLINE_SECONDS
    backoff_base_seconds: float = BACKOFF_BASE_SECONDS
    backoff_cap_seconds: float = BACKOFF_CAP_SECONDS
    poll_interval_seconds: float = POLL_INTERVAL_SECONDS

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= BATCH_MAX_ITEMS:
            raise ValueError(f"batch_size must be within 1..{BATCH_MAX_ITEMS}")
        if self.request_deadline_seconds <= 0 or self.request_deadline_seconds >= self.lease_seconds:
            raise ValueError("request_deadline_seconds must be positive and shorter than lease_seconds")
        if not 0 < self.backoff_base_seconds <= self.backoff_cap_seconds:
            raise ValueError("backoff needs 0 < base <= cap")
        if self.poll_interval_seconds <= 0:
            raise ValueError("poll_interval_seconds must be positive")


def load_relay_config(
    *,
    enabled: bool,
    bell_url: str | None,
    key_file: str | os.PathLike[str] | None,
    key_id: str | None,
) -> RelayConfig | None:
    """``None`` when the relay is off; otherwise a validated config with the key loaded (the key file must
    hold at least 32 random bytes as hex, see docs/signing.md). Raises ConfigError naming the setting."""
    if not enabled:
        return None
    if not bell_url:
        raise ConfigError(SETTING_URL, "missing", f"required when {SETTING_ENABLED} is true")
    url = validate_bell_url(bell_url)
    if not key_id:
        raise ConfigError(SETTING_KEY_ID, "missing", f"required when {SETTING_ENABLED} is true")
    if KEY_ID_PATTERN.fullmatch(key_id) is None:
        raise ConfigError(SETTING_KEY_ID, "key_id_malformed", "must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}")
    if key_file is None or not os.fspath(key_file):
        raise ConfigError(SETTING_KEY_FILE, "missing", f"required when {SETTING_ENABLED} is true")
    secret = load_key_file(key_file, SETTING_KEY_FILE)
    return RelayConfig(bell_url=url, keyring=KeyRing([SigningKey(key_id, secret)], active_key_id=key_id))
