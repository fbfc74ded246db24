"""Every refusal signal-watcher answers: `ServiceError`s with a stable code and the HTTP status (and
Retry-After) the platform's problem handlers answer them with.

    ServiceError
    ├── ValidationFailed         422  validation codes (too_many_headers, invalid_json_path, ...)
    │   └── UrlRefused           422  url_*
    │       └── TargetForbidden  403  ssrf_*: the SSRF guard
    │           └── NetworkConfined   403  probe_network_confined: SIGNAL_PROBE_ONLY_NETWORKS
    ├── WatcherNotFound          404  not_found
    ├── Conflict                 409
    │   ├── LimitReached              watcher_limit_reached
    │   ├── NotActive                 watcher_not_active
    │   └── StoredBodyNeedsPost       stored_body_requires_post
    ├── CheckTooSoon             429  check_too_soon (Retry-After: CHECK_NOW_MIN_SPACING_SECONDS)
    └── SecretsUnreadable        500  secret_unreadable, secret_key_unknown
"""

from __future__ import annotations

from yovision_platform.errors import ServiceError

__all__ = [
    "CHECK_NOW_MIN_SPACING_SECONDS",
    "CheckTooSoon",
    "Conflict",
    "LimitReached",
    "NetworkConfined",
    "NotActive",
    "SecretsUnreadable",
    "StoredBodyNeedsPost",
    "TargetForbidden",
    "UrlRefused",
    "ValidationFailed",
    "WatcherNotFound",
]

# A check requested through the API waits at least this long after the watcher's last check (database
# clock), so the API cannot be used to hammer a target; the refusal's Retry-After says the same.
CHECK_NOW_MIN_SPACING_SECONDS = 5


class ValidationFailed(ServiceError):
    """A watcher definition breaks a rule; the code names it (`too_many_headers`, `invalid_json_path`)."""

    code = "validation_failed"
    status = 422


class UrlRefused(ValidationFailed):
    """A probe URL is malformed (`url_*`)."""

    code = "url_refused"


class TargetForbidden(UrlRefused):
    """The deployment's policy refuses the URL's host or address: the SSRF guard (`ssrf_*`) or the network
    confinement (`NetworkConfined`). A policy of the deployment (its allow-list, its confinement) and of DNS
    at that moment, so 403, not 422."""

    code = "ssrf_blocked"
    status = 403


class NetworkConfined(TargetForbidden):
    """The address lies outside every network of `SIGNAL_PROBE_ONLY_NETWORKS` (set: probes are confined to
    those networks, as in test environments). Checked in addition to the SSRF guard, after it: an address
    the guard refuses keeps its `ssrf_*` code; this refuses what the guard would let through, public
    addresses included. The same code is the probe failure `probe_network_confined` at connect time."""

    code = "probe_network_confined"


class WatcherNotFound(ServiceError):
    """The caller has no watcher with this id; another user's watcher is not found either, never 403."""

    code = "not_found"
    status = 404


class Conflict(ServiceError):
    """The request conflicts with the caller's quota or the watcher's state: retrying it unchanged is
    refused again."""

    code = "conflict"
    status = 409


class LimitReached(Conflict):
    code = "watcher_limit_reached"  # the caller already has SIGNAL_MAX_WATCHERS_PER_USER watchers


class NotActive(Conflict):
    code = "watcher_not_active"  # only an ACTIVE watcher is checked on request


class StoredBodyNeedsPost(Conflict):
    """An update to a method other than POST that leaves out `body` keeps the stored body, which only POST
    may carry (send `"body": null` to drop it)."""

    code = "stored_body_requires_post"


class CheckTooSoon(ServiceError):
    """The watcher's last check is under CHECK_NOW_MIN_SPACING_SECONDS old (the store's clock)."""

    code = "check_too_soon"
    status = 429
    retry_after = CHECK_NOW_MIN_SPACING_SECONDS


class SecretsUnreadable(ServiceError):
    """The watcher's stored secrets cannot be decrypted with the configured key ring: `secret_unreadable`
    (a damaged value) or `secret_key_unknown` (its key is not in the ring). An operator problem
    (docs/runbooks/rotating-keys.md), answered without the value."""

    code = "secret_unreadable"
    status = 500
