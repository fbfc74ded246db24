"""Who is signed in, and what the console lets them see and do.

The services decide for themselves (each checks the forwarded identity); the console only hides what the
user could not use and guards the one credential it holds itself: Sense's operator token, used only for
users with ``sense:operate``.
"""

from __future__ import annotations

from dataclasses import dataclass

SENSE_OPERATE = "sense:operate"
ORPHAN_READ = "orphan:read"
AUDIT_READ = "bell:audit-read"
SIGNAL_ADMIN_READ = "signal:read"
MEDIA_DRAIN = "media:drain"
PERMISSIONS = (SENSE_OPERATE, ORPHAN_READ, AUDIT_READ, SIGNAL_ADMIN_READ, MEDIA_DRAIN)


@dataclass(frozen=True)
class User:
    subject: str
    permissions: frozenset[str]
    token: str | None = None  # production: the forwarded bearer token (never rendered, never logged)

    def may(self, permission: str) -> bool:
        return permission in self.permissions


class NotPermitted(Exception):
    """The signed-in user lacks the permission a page needs."""

    def __init__(self, permission: str) -> None:
        super().__init__(permission)
        self.permission = permission
