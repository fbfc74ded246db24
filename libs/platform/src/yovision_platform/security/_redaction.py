"""Secret redaction for anything that may reach a log line.

Layers, applied in this order by :func:`redact_text`:

1. Registered secrets: every value passed to :func:`register_secret` (loaded DSNs, key file contents, raw
   key bytes in hex and base64 forms) is replaced wherever it appears.
2. Credentials in URIs: ``scheme://user:pass@host`` becomes ``scheme://***@host`` (postgresql, rtsp, http(s),
   any scheme). The user info runs to the last ``@`` before whitespace or a quote, so a password containing
   ``@`` or ``/`` is still covered; the price is that an ``@`` later in the same token over-redacts.
3. ``password=...``-style key/value pairs (libpq keyword DSNs, query strings, ``key: value`` text).
4. ``Authorization``/``Cookie``/``X-...-Signature`` header values, ``Bearer``/``Basic`` credentials and
   ``v1=<hex>`` signatures.

Structured values (:func:`redact_value`) additionally replace the whole value of any field whose name looks
sensitive (:func:`is_sensitive_field_name`), and render bytes as their length only.

Short registered secrets over-redact (a secret ``"ab"`` hides every ``ab``); that is accepted, leaking is not.
"""

from __future__ import annotations

import base64
import contextlib
import re
import threading
import traceback
from collections.abc import Mapping
from types import TracebackType
from typing import TypeAlias
from urllib.parse import unquote, urlsplit

__all__ = [
    "REDACTED",
    "SecretRegistry",
    "default_registry",
    "is_sensitive_field_name",
    "redact_exception",
    "redact_field",
    "redact_text",
    "redact_value",
    "register_secret",
]

REDACTED = "***"
MAX_REDACTED_NESTING_DEPTH = 8

_URI_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s'\"<>`]*@")
_SECRET_KEYVAL = re.compile(
    r"""(?ix)
    ((?:ssl)?password|passwd|pwd|secret|client_secret|api[_-]?key|access[_-]?key|private[_-]?key
       |hmac[_-]?key|aes[_-]?key|signing[_-]?key|token|access[_-]?token|refresh[_-]?token)
    (["']?\s*[=:]\s*)
    (?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\S+)
    """
)
_AUTH_HEADER = re.compile(
    r"""(?i)(authorization|cookie|x-[a-z0-9-]*signature)(["']?\s*[:=]\s*)"""
    r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\r\n]*)"""
)
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9\-._~+/]+=*")
_SIGNATURE_VALUE = re.compile(r"(?i)\bv1=[0-9a-f]{16,}")

_SENSITIVE_NAME_PARTS = (
    "secret",
    "password",
    "passwd",
    "token",
    "authorization",
    "cookie",
    "dsn",
    "source_uri",
    "sourceuri",
    "credential",
    "signature",
    "apikey",
    "api_key",
    "private_key",
    "privatekey",
)
_SENSITIVE_KEY_PREFIXES = ("hmac", "aes", "signing", "api", "private", "secret", "encryption", "master")
_NAME_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


def is_sensitive_field_name(name: str) -> bool:
    """True for field names that hold secrets: key, hmac_key, aesKey, secret, token, password,
    authorization, cookie, dsn, source_uri, ... but not key_id, partition_key or idempotency_key."""
    lowered = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    if any(part in lowered for part in _SENSITIVE_NAME_PARTS):
        return True
    words = [word for word in _NAME_WORD_SPLIT.split(lowered) if word]
    if words == ["key"] or words == ["keys"]:
        return True
    return any(
        words[i + 1] in ("key", "keys") and words[i] in _SENSITIVE_KEY_PREFIXES for i in range(len(words) - 1)
    )


class SecretRegistry:
    """A thread-safe set of secret strings that :meth:`redact` replaces wherever they appear."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def register(self, value: str | bytes) -> None:
        """Remember a secret. Bytes are also registered as hex (both cases) and base64 (standard and
        URL-safe, padded and not); a URI's password is registered on its own as well."""
        forms = _secret_forms(value)
        if not forms:
            return
        with self._lock:
            before = len(self._secrets)
            self._secrets.update(forms)
            if len(self._secrets) != before:
                self._pattern = None

    def copy(self) -> SecretRegistry:
        """A registry knowing the same secrets, which learns on its own from now on."""
        twin = SecretRegistry()
        with self._lock:
            twin._secrets = set(self._secrets)
        return twin

    def clear(self) -> None:
        with self._lock:
            self._secrets.clear()
            self._pattern = None

    def __len__(self) -> int:
        return len(self._secrets)

    def redact(self, text: str) -> str:
        pattern = self._compiled()
        return text if pattern is None else pattern.sub(REDACTED, text)

    def _compiled(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None and self._secrets:
                ordered = sorted(self._secrets, key=len, reverse=True)
                self._pattern = re.compile("|".join(re.escape(secret) for secret in ordered))
            return self._pattern


def _secret_forms(value: str | bytes) -> set[str]:
    forms: set[str] = set()
    if isinstance(value, bytes):
        if not value:
            return forms
        forms.update({value.hex(), value.hex().upper()})
        for encoded in (base64.b64encode(value), base64.urlsafe_b64encode(value)):
            text = encoded.decode("ascii")
            forms.update({text, text.rstrip("=")})
        with contextlib.suppress(UnicodeDecodeError):
            forms.add(value.decode("utf-8"))
    else:
        if not value:
            return forms
        forms.add(value)
        stripped = value.strip()
        if stripped:
            forms.add(stripped)
        forms.update(_uri_password_forms(stripped))
    return {form for form in forms if form}


def _uri_password_forms(value: str) -> set[str]:
    if "://" not in value:
        return set()
    try:
        password = urlsplit(value).password
    except ValueError:
        return set()
    return {password, unquote(password)} if password else set()


default_registry = SecretRegistry()


def register_secret(value: str | bytes) -> None:
    """Register a loaded secret with the process-wide registry used by logging."""
    default_registry.register(value)


def redact_text(text: str, registry: SecretRegistry | None = None) -> str:
    """Return ``text`` with every known secret shape replaced by ``***``."""
    text = (registry if registry is not None else default_registry).redact(text)
    text = _URI_USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _SECRET_KEYVAL.sub(rf"\1\2{REDACTED}", text)
    text = _AUTH_HEADER.sub(rf"\1\2{REDACTED}", text)
    text = _AUTH_SCHEME.sub(rf"\1 {REDACTED}", text)
    return _SIGNATURE_VALUE.sub(f"v1={REDACTED}", text)


JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None


def redact_value(value: object, registry: SecretRegistry | None = None, _depth: int = 0) -> JsonValue:
    """Return a JSON-safe, redacted copy of ``value``: mappings keep their keys but sensitive-named fields
    become ``***``; sequences are walked; bytes become ``<bytes len=N>``; other objects go through
    ``str`` and :func:`redact_text`."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact_text(value, registry)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<bytes len={len(value)}>"
    if _depth >= MAX_REDACTED_NESTING_DEPTH:
        return REDACTED
    if isinstance(value, Mapping):
        redacted: dict[str, JsonValue] = {}
        for key, item in value.items():
            redacted[redact_text(str(key), registry)] = redact_field(str(key), item, registry, _depth + 1)
        return redacted
    if isinstance(value, list | tuple | set | frozenset):
        return [redact_value(item, registry, _depth + 1) for item in value]
    if isinstance(value, BaseException):
        return redact_text(f"{type(value).__name__}: {value}", registry)
    return redact_text(str(value), registry)


def redact_field(
    name: str, value: object, registry: SecretRegistry | None = None, _depth: int = 0
) -> JsonValue:
    """Redact one named field: ``***`` if the name looks sensitive, else :func:`redact_value`."""
    if is_sensitive_field_name(name):
        return REDACTED
    return redact_value(value, registry, _depth)


ExcInfo: TypeAlias = tuple[type[BaseException], BaseException, TracebackType | None]


def redact_exception(exc_info: ExcInfo | BaseException, registry: SecretRegistry | None = None) -> str:
    """Format an exception with its traceback (and chained causes), then redact the whole text."""
    exc = exc_info if isinstance(exc_info, BaseException) else exc_info[1]
    rendered = "".join(traceback.format_exception(exc)).rstrip("\n")
    return redact_text(rendered, registry)
