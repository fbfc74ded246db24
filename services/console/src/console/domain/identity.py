"""Who is signed in, and what the console lets them see and do.

The services decide for themselves: each verifies the user's access token (the provider's signature, its
audience, the permissions it grants). The console only hides what the user could not use: its menu and its
pages follow the permissions the provider granted at sign-in (the granted scopes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    # the user's access token, for every service call (never rendered, never logged)
    token: str = field(repr=False)

    def may(self, permission: str) -> bool:
        return permission in self.permissions


class NotPermitted(Exception):
    """The signed-in user lacks the permission a page needs."""

    def __init__(self, permission: str) -> None:
        super().__init__(permission)
        self.permission = permission
