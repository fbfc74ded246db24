"""The permissions of the services' APIs and the audiences of their access tokens: one catalogue for the
identity provider's clients, the console and the services.

An access token names the services it is for in `aud` (a service's audience is its name) and carries
permissions as `service:action` grants (scopes at Hydra; roles or groups elsewhere, through each service's
permission mapping).
"""

from __future__ import annotations

__all__ = ["AUDIENCES", "PERMISSIONS"]

AUDIENCES = ("sense-reconciler", "orphan-scanner", "bell-receiver", "signal-watcher", "media-worker")
PERMISSIONS = (
    "sense:operate",
    "sense:read",
    "orphan:read",
    "bell:audit-read",
    "signal:read",
    "media:drain",
)
