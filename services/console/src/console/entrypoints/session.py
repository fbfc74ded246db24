"""Encrypted cookie sessions and CSRF tokens. The console keeps no session store of its own.

A session is JSON, sealed with AES-256-GCM (a fresh 96-bit nonce each time; the key derived by HKDF-SHA256
from the session key, the cookie format's name bound as associated data) and carried in one cookie,
``yv_session``, or, when the sealed text is longer than `COOKIE_VALUE_MAX_CHARS`, in numbered ones
(``yv_session``, ``yv_session_1``, ``yv_session_2``): each Set-Cookie stays well under the 4,096 bytes a
browser keeps per cookie. It holds a random CSRF token, a flash message, the sign-ins under way (their
`state`, `nonce` and PKCE verifier), the dev login's challenge and, once signed in, the user and the
provider's tokens: the access token, the refresh token and the ID token. Nothing of it is readable or
changeable without the key: a tampered, foreign, incomplete or expired (8 h since it was last written)
cookie is a fresh anonymous session.

Every cookie is HttpOnly (no script reads it), SameSite=Lax (the provider's redirect back to the callback is
a top-level navigation, which Lax lets through), and Secure except for the dev login's console reached on a
loopback address (``http://127.0.0.1``, ``localhost``, ``[::1]``). Without the dev login it is always
Secure: a console behind a proxy is reached over https whatever Host the proxy forwards.

Every state-changing request (form or htmx/fetch) must carry the CSRF token (form field ``csrf`` or header
``X-CSRF-Token``); a missing or wrong one is ``403 csrf_failed`` before anything is called.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import math
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from fastapi import Request, Response

from console.domain.sign_in import PendingSignIn, SignedIn, Tokens
from yovision_platform.settings import is_loopback_host

COOKIE_NAME = "yv_session"
COOKIE_CHUNKS_MAX = 3
COOKIE_VALUE_MAX_CHARS = 3600
SET_COOKIE_MAX_BYTES = 4096  # what a browser keeps of one cookie: every Set-Cookie stays under it
SESSION_MAX_AGE_SECONDS = 8 * 3600
CLOCK_SKEW_SECONDS = 60
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_TOKEN_BYTES = 32
SUBJECT_MAX_CHARS = 128
NONCE_BYTES = 12
KEY_INFO = b"yovision-console-session-cookie/1"
ASSOCIATED_DATA = b"yv_session/1"


def cookie_name(index: int) -> str:
    return COOKIE_NAME if index == 0 else f"{COOKIE_NAME}_{index}"


class SessionTooLarge(Exception):
    """The session does not fit in `COOKIE_CHUNKS_MAX` cookies."""


@dataclass(frozen=True)
class LoginInProgress:
    """The dev login page being shown: the provider's login challenge (kept here, never put in a page) and,
    when the provider remembers this browser's login, the subject it is fixed to."""

    challenge: str
    subject: str | None = None


@dataclass
class Session:
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(CSRF_TOKEN_BYTES))
    flash: str | None = None
    user: SignedIn | None = None
    pending: tuple[PendingSignIn, ...] = ()
    login: LoginInProgress | None = None
    changed: bool = False
    ended: bool = False  # signed out: every cookie of the session is deleted

    def as_dict(self, written_at: float) -> dict[str, Any]:
        user = self.user
        return {
            "w": written_at,
            "c": self.csrf,
            "f": self.flash,
            "u": None
            if user is None
            else {
                "s": user.subject,
                "p": sorted(user.permissions),
                "a": user.tokens.access_token,
                "r": user.tokens.refresh_token,
                "i": user.tokens.id_token,
                "e": user.tokens.expires_at,
            },
            "p": [[p.state, p.nonce, p.verifier, p.started_at] for p in self.pending],
            "l": None if self.login is None else [self.login.challenge, self.login.subject],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Session:
        user, login = data["u"], data["l"]
        return cls(
            csrf=str(data["c"]),
            flash=data["f"] if isinstance(data["f"], str) else None,
            user=None
            if user is None
            else SignedIn(
                str(user["s"]),
                frozenset(str(p) for p in user["p"]),
                Tokens(str(user["a"]), user["r"], str(user["i"]), float(user["e"])),
            ),
            pending=tuple(PendingSignIn(str(s), str(n), str(v), float(t)) for s, n, v, t in data["p"]),
            login=None if login is None else LoginInProgress(str(login[0]), login[1]),
        )


class Sessions:
    """Reads and writes the session cookies of a request (see the module docstring)."""

    def __init__(self, key: bytes, *, always_secure: bool, clock: Callable[[], float] = time.time) -> None:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_INFO).derive(key)
        self._aead = AESGCM(derived)
        self._always_secure = always_secure
        self._clock = clock

    def load(self, request: Request) -> Session:
        parts: list[str] = []
        for index in range(COOKIE_CHUNKS_MAX):
            part = request.cookies.get(cookie_name(index))
            if part is None:
                break
            parts.append(part)
        if not parts:
            return Session(changed=True)
        try:
            data = json.loads(self._open("".join(parts)))
            written_at = float(data["w"])
            now = self._clock()
            if not now - SESSION_MAX_AGE_SECONDS < written_at <= now + CLOCK_SKEW_SECONDS:
                return Session(changed=True)
            return Session.from_dict(data)
        except (InvalidTag, binascii.Error, KeyError, TypeError, ValueError):
            return Session(changed=True)

    def store(self, request: Request, response: Response, session: Session) -> None:
        if not session.changed:
            return
        values = [] if session.ended else self.cookie_values(session)
        secure = self._always_secure or not is_loopback_request(request)
        for index, value in enumerate(values):
            response.set_cookie(
                cookie_name(index),
                value,
                max_age=SESSION_MAX_AGE_SECONDS,
                httponly=True,
                samesite="lax",
                secure=secure,
                path="/",
            )
        for index in range(len(values), COOKIE_CHUNKS_MAX):
            if cookie_name(index) in request.cookies:
                response.delete_cookie(
                    cookie_name(index), path="/", secure=secure, httponly=True, samesite="lax"
                )

    def cookie_values(self, session: Session) -> list[str]:
        """The session, sealed and split into cookie values; SessionTooLarge beyond `COOKIE_CHUNKS_MAX`."""
        sealed = self._seal(json.dumps(session.as_dict(self._clock()), separators=(",", ":")))
        count = math.ceil(len(sealed) / COOKIE_VALUE_MAX_CHARS)
        if count > COOKIE_CHUNKS_MAX:
            raise SessionTooLarge()
        size = math.ceil(len(sealed) / count)
        return [sealed[i : i + size] for i in range(0, len(sealed), size)]

    def fits(self, session: Session) -> bool:
        try:
            self.cookie_values(session)
        except SessionTooLarge:
            return False
        return True

    def _seal(self, text: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, text.encode(), ASSOCIATED_DATA)
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def _open(self, value: str) -> str:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        if len(raw) <= NONCE_BYTES:
            raise ValueError("too short")
        return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], ASSOCIATED_DATA).decode()


def is_loopback_request(request: Request) -> bool:
    return is_loopback_host(request.url.hostname)


def csrf_matches(session: Session, presented: str | None) -> bool:
    return presented is not None and hmac.compare_digest(presented.encode(), session.csrf.encode())
