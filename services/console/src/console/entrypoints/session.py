"""Signed cookie sessions and CSRF tokens. The console stores nothing server-side.

The cookie ``yv_session`` holds, signed with the session key (itsdangerous, timestamped, HMAC-SHA256
rather than its SHA-1 default): a random CSRF token and, after a dev sign-in, the chosen user and
permissions -- never a token. It is HttpOnly, SameSite=Lax, and Secure except for a dev sign-in console
reached on a loopback address (``http://127.0.0.1``, ``localhost``, ``[::1]``). Behind the OIDC proxy
(production) it is always Secure: the browser talks https to the proxy, and the Host the proxy forwards
(often its upstream's own ``127.0.0.1``) says nothing about that.

Every state-changing request (form or htmx/fetch) must carry the CSRF token (form field ``csrf`` or header
``X-CSRF-Token``); a missing or wrong one is ``403 csrf_failed`` before anything is called.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response
from itsdangerous import BadSignature, URLSafeTimedSerializer

from yovision_platform.settings import is_loopback_host

COOKIE_NAME = "yv_session"
SESSION_MAX_AGE_SECONDS = 8 * 3600
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_TOKEN_BYTES = 32
SUBJECT_MAX_CHARS = 128
SESSION_SALT = "yovision-console-session"


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
    def __init__(self, key: bytes, *, always_secure: bool) -> None:
        self._serializer = session_serializer(key)
        self._always_secure = always_secure

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
            secure=self._always_secure or not is_loopback_request(request),
            path="/",
        )

    @staticmethod
    def clear(response: Response) -> None:
        response.delete_cookie(COOKIE_NAME, path="/")


def session_serializer(key: bytes) -> URLSafeTimedSerializer:
    """HMAC-SHA256 over the timestamped payload (itsdangerous' own default would be SHA-1)."""
    return URLSafeTimedSerializer(key, salt=SESSION_SALT, signer_kwargs={"digest_method": hashlib.sha256})


def is_loopback_request(request: Request) -> bool:
    return is_loopback_host(request.url.hostname)


def csrf_matches(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), session.csrf.encode())
