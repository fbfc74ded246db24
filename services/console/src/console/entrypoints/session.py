"""Signed cookie sessions and CSRF tokens. The console stores nothing server-side.

The cookie ``yv_session`` holds, signed with the session key (itsdangerous, HMAC-SHA256, timestamped): a
random CSRF token and, after a dev sign-in, the chosen user and permissions -- never a token. It is HttpOnly,
SameSite=Lax, and Secure unless the console is reached on a loopback address. Every state-changing request
(form or htmx/fetch) must carry the CSRF token (form field ``csrf`` or header ``X-CSRF-Token``); a missing or
wrong one is ``403 csrf_failed`` before anything is called.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

COOKIE_NAME = "yv_session"
SESSION_MAX_AGE_SECONDS = 8 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_TOKEN_BYTES = 32
SUBJECT_MAX_CHARS = 128


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(CSRF_TOKEN_BYTES))
    subject: str | None = None
    permissions: tuple[str, ...] = ()
    flash: str | None = None
    changed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"c": self.csrf, "s": self.subject, "p": list(self.permissions), "f": self.flash}


class Sessions:
    def __init__(self, key: bytes) -> None:
        self._serializer = URLSafeTimedSerializer(key, salt="yovision-console-session")

    def load(self, request: Request) -> Session:
        raw = request.cookies.get(COOKIE_NAME)
        if raw:
            try:
                data = self._serializer.loads(raw, max_age=SESSION_MAX_AGE_SECONDS)
                return Session(
                    csrf=str(data["c"]),
                    subject=data.get("s"),
                    permissions=tuple(data.get("p") or ()),
                    flash=data.get("f"),
                )
            except (BadSignature, KeyError, TypeError, ValueError):
                pass
        return Session(changed=True)

    def store(self, request: Request, response: Response, session: Session) -> None:
        if not session.changed:
            return
        response.set_cookie(
            COOKIE_NAME,
            self._serializer.dumps(session.as_dict()),
            max_age=SESSION_MAX_AGE_SECONDS,
            httponly=True,
            samesite="lax",
            secure=not is_loopback_request(request),
            path="/",
        )

    @staticmethod
    def clear(response: Response) -> None:
        response.delete_cookie(COOKIE_NAME, path="/")


def is_loopback_request(request: Request) -> bool:
    host = request.url.hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def csrf_matches(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), session.csrf.encode())
