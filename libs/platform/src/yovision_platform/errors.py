"""Platform exceptions: one module, one hierarchy, stable codes.

Every exception carries a ``code``: a stable snake_case string that APIs, metrics and audit rows may use.
The human message never contains secrets or caller input; it is safe to log and to return.

    PlatformError                 code = "platform_error"
    ├── ServiceError              code = "service_error"    (.status: the HTTP status an API answers)
    ├── ConfigError               code = "config_invalid"   (.problems: setting name + reason code each)
    ├── SignatureError            code = "unauthorized"     (.reason: internal SignatureRejectReason)
    ├── LeaseLost                 code = "lease_lost"
    ├── SchemaOutdated            code = "schema_outdated"
    ├── MigrationError            code = "migration_failed"
    ├── OutboxError               code = "outbox_refused"
    └── UnsafeRole                code = "unsafe_runtime_role"

``PlatformError(code, detail)`` may override the class code per instance (a more specific stable code,
e.g. ``SchemaOutdated("schema_missing", ...)``). Add new subclasses here, each with a class-level ``code``.

``ServiceError`` is the one base of every refusal a service's API answers: each service's
``domain/errors.py`` subclasses it with a class-level ``code`` and ``status``, and
`yovision_platform.web` answers any of them as a problem-details body with that status and code.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "LeaseLost",
    "MigrationError",
    "OutboxError",
    "PlatformError",
    "SchemaOutdated",
    "ServiceError",
    "SignatureError",
    "SignatureRejectReason",
    "UnsafeRole",
]


class PlatformError(Exception):
    """Base of every platform exception.

    ``PlatformError("message_too_large", "message exceeds 1048576 bytes")``: ``code`` (default: the class's
    code) is stable snake_case; ``detail`` is an optional human explanation that the caller guarantees
    holds no secret and no caller input. ``str(exc)`` is ``"code"`` or ``"code: detail"``.
    """

    code: str = "platform_error"

    def __init__(self, code: str | None = None, detail: str | None = None) -> None:
        if code is not None:
            self.code = code
        self.detail = detail
        super().__init__(self.code if detail is None else f"{self.code}: {detail}")


class ServiceError(PlatformError):
    """A refusal with a stable ``code`` and the HTTP ``status`` an API answers it with.

    ``retry_after`` (seconds, 429 and 503 and refusals that clear by themselves) becomes the response's
    ``Retry-After`` header and the body's ``retry_after``; ``headers`` are further response headers (for
    example ``WWW-Authenticate``); ``detail``, when given, is answered as the problem's ``detail``: a fixed
    text (a hint), so it must never carry caller input, nor may the code or a header.
    """

    code = "service_error"
    status: int = 400
    retry_after: int | None = None
    headers: Mapping[str, str] = MappingProxyType({})

    def __init__(
        self,
        code: str | None = None,
        detail: str | None = None,
        *,
        status: int | None = None,
        retry_after: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if status is not None:
            self.status = status
        if retry_after is not None:
            self.retry_after = retry_after
        if headers is not None:
            self.headers = MappingProxyType(dict(headers))
        super().__init__(code, detail)

    def response_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
        return headers


@dataclass(frozen=True)
class ConfigProblem:
    """One failing setting: its name (the env var where there is one), a stable reason code, and a
    short human explanation that never contains the setting's value."""

    setting: str
    reason: str
    detail: str = ""

    def describe(self) -> str:
        return f"{self.setting}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


class ConfigError(PlatformError):
    """Configuration is missing or invalid. Names each failing setting and why, never the value."""

    code = "config_invalid"

    def __init__(self, setting: str, reason: str, detail: str = "") -> None:
        self.problems: tuple[ConfigProblem, ...] = (ConfigProblem(setting, reason, detail),)
        super().__init__(detail=self._render_problems())

    @classmethod
    def from_problems(cls, problems: Iterable[ConfigProblem]) -> ConfigError:
        collected = tuple(problems)
        if not collected:
            raise ValueError("ConfigError needs at least one problem")
        error = cls(collected[0].setting, collected[0].reason, collected[0].detail)
        error.problems = collected
        error.detail = error._render_problems()
        error.args = (f"{error.code}: {error.detail}",)
        return error

    @property
    def settings(self) -> tuple[str, ...]:
        return tuple(problem.setting for problem in self.problems)

    def _render_problems(self) -> str:
        return "; ".join(problem.describe() for problem in self.problems)


class SignatureRejectReason(enum.StrEnum):
    """Why a signed request was refused. Internal only (logs, metric labels); callers always see the
    uniform ``unauthorized``."""

    MISSING_HEADER = "missing_header"
    DUPLICATE_HEADER = "duplicate_header"
    MALFORMED_KEY_ID = "malformed_key_id"
    UNKNOWN_KEY_ID = "unknown_key_id"
    MALFORMED_TIMESTAMP = "malformed_timestamp"
    STALE_TIMESTAMP = "stale_timestamp"
    MALFORMED_NONCE = "malformed_nonce"
    MALFORMED_SIGNATURE = "malformed_signature"
    MALFORMED_REQUEST = "malformed_request"
    SIGNATURE_MISMATCH = "signature_mismatch"


class SignatureError(PlatformError):
    """A signed request failed verification. ``code`` and ``str(exc)`` are always ``unauthorized`` so a
    response built from them reveals nothing; ``reason`` tells operators (via metrics) what went wrong."""

    code = "unauthorized"

    def __init__(self, reason: SignatureRejectReason) -> None:
        self.reason = reason
        super().__init__()


class LeaseLost(PlatformError):
    """The caller's lease expired or was taken over; its write was fenced off."""

    code = "lease_lost"


class SchemaOutdated(PlatformError):
    """The database schema is older than this code needs; run the migrations."""

    code = "schema_outdated"


class MigrationError(PlatformError):
    """Migration files or the migration history are inconsistent (gap, changed checksum, bad name)."""

    code = "migration_failed"


class OutboxError(PlatformError):
    """An outbox write was refused before touching the database."""

    code = "outbox_refused"


class UnsafeRole(PlatformError):
    """The runtime database role holds privileges it must not have (e.g. owner or superuser)."""

    code = "unsafe_runtime_role"
