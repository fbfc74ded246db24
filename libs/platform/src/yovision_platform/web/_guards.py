"""ASGI guards every API gets before any route runs: a request body read deadline and a NUL-free text rule.

**Body deadline.** A body must arrive within `BodyReadRule.total_seconds` of the request start, and (when
`min_bytes_per_second` is set) never fall behind that rate after `grace_seconds`: byte *n* must have
arrived by ``start + grace + n / rate``. A client that declares 65,536 bytes, sends 100 and idles is
answered ``408 request_timeout`` (with ``Connection: close``) when the rule runs out, instead of holding a
worker, a slot or a file forever. Once the body is complete, later `receive` calls (disconnect listeners)
are not limited.

**Text rule.** PostgreSQL text cannot hold U+0000, so a NUL anywhere in the path, the query string, a
header or a JSON body string is refused with ``400 invalid_text`` before any work is done. JSON bodies
are scanned while they stream (no extra buffering): the only way to write NUL in valid JSON is the
escape ``\\u0000`` preceded by an odd run of backslashes.

`RequestGuardPolicy` holds the rules; a service adjusts it (per method and path pattern) in its configure
hook: a different rule for slow uploads, or none for a route that enforces its own deadline and error body.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from yovision_platform.errors import ServiceError
from yovision_platform.web._problems import problem_response

__all__ = [
    "DEFAULT_BODY_READ_SECONDS",
    "NUL_FREE_PATTERN",
    "BodyReadRule",
    "RequestGuardPolicy",
    "RequestGuards",
]

DEFAULT_BODY_READ_SECONDS = 10.0
INVALID_TEXT = "invalid_text"
# The text rule as a JSON Schema pattern (ECMA-262 and Python alike): what the OpenAPI documents state.
NUL_FREE_PATTERN = "^[^\\x00]*$"
REQUEST_TIMEOUT = "request_timeout"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_ESCAPED_NUL = re.compile(rb"(\\+)u0000")
_ESCAPE_TAIL_BYTES = len(b"u0000")
_BACKSLASH = 0x5C


@dataclass(frozen=True)
class BodyReadRule:
    """How long a request body may take: a total bound, a minimum rate after a grace period, or both."""

    total_seconds: float | None = DEFAULT_BODY_READ_SECONDS
    min_bytes_per_second: float | None = None
    grace_seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.total_seconds is None and self.min_bytes_per_second is None:
            raise ValueError("a body read rule needs a total deadline or a minimum rate")
        if self.total_seconds is not None and self.total_seconds <= 0:
            raise ValueError("total_seconds must be > 0")
        if self.min_bytes_per_second is not None and self.min_bytes_per_second <= 0:
            raise ValueError("min_bytes_per_second must be > 0")
        if self.grace_seconds < 0:
            raise ValueError("grace_seconds must be >= 0")

    def deadline(self, started: float, received_bytes: int) -> float:
        """The loop time by which more of the body must have arrived."""
        limits = []
        if self.total_seconds is not None:
            limits.append(started + self.total_seconds)
        if self.min_bytes_per_second is not None:
            limits.append(started + self.grace_seconds + received_bytes / self.min_bytes_per_second)
        return min(limits)


@dataclass(frozen=True)
class _Override:
    method: str
    path: re.Pattern[str]
    body_rule: BodyReadRule | None
    check_text: bool


@dataclass
class RequestGuardPolicy:
    """The default rule plus per-route overrides (first match wins)."""

    body_rule: BodyReadRule = field(default_factory=BodyReadRule)
    _overrides: list[_Override] = field(default_factory=list)

    def override(
        self, method: str, path_pattern: str, *, body_rule: BodyReadRule | None, check_text: bool = True
    ) -> None:
        """Use `body_rule` (None: no platform deadline) for `method` on paths fully matching the regex."""
        self._overrides.append(_Override(method.upper(), re.compile(path_pattern), body_rule, check_text))

    def for_request(self, method: str, path: str) -> tuple[BodyReadRule | None, bool]:
        for rule in self._overrides:
            if rule.method == method and rule.path.fullmatch(path):
                return rule.body_rule, rule.check_text
        return self.body_rule, True


class _NulScanner:
    """Finds an escaped NUL in JSON text fed in arbitrary chunks."""

    def __init__(self) -> None:
        self._carry = b""

    def found_in(self, chunk: bytes) -> bool:
        data = self._carry + chunk
        if any(len(m.group(1)) % 2 == 1 for m in _ESCAPED_NUL.finditer(data)):
            return True
        # Keep what a match could still start with: a partial escape and the whole backslash run before it.
        cut = max(len(data) - _ESCAPE_TAIL_BYTES, 0)
        while cut > 0 and data[cut - 1] == _BACKSLASH:
            cut -= 1
        self._carry = data[cut:]
        return False


def _head_has_nul(scope: Scope) -> bool:
    query: bytes = scope.get("query_string", b"")
    return (
        "\x00" in scope.get("path", "")
        or b"\x00" in query
        or b"%00" in query
        or any(b"\x00" in name or b"\x00" in value for name, value in scope.get("headers", ()))
    )


def _is_json_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media_type: bytes = value.split(b";", 1)[0].strip().lower()
            return media_type == b"application/json" or (
                media_type.startswith(b"application/") and media_type.endswith(b"+json")
            )
    return False


class RequestGuards:
    """The ASGI middleware applying a `RequestGuardPolicy` to every HTTP request."""

    def __init__(self, app: ASGIApp, policy: RequestGuardPolicy) -> None:
        self._app = app
        self._policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        body_rule, check_text = self._policy.for_request(scope["method"], scope["path"])
        if check_text and _head_has_nul(scope):
            await problem_response(400, INVALID_TEXT)(scope, receive, send)
            return
        scanner = _NulScanner() if check_text and _is_json_body(scope) else None
        if body_rule is None and scanner is None:
            await self._app(scope, receive, send)
            return
        await self._app(scope, _guarded_receive(receive, body_rule, scanner), send)


def _guarded_receive(receive: Receive, rule: BodyReadRule | None, scanner: _NulScanner | None) -> Receive:
    loop = asyncio.get_running_loop()
    started = loop.time()
    received = 0
    complete = False

    async def guarded() -> Message:
        nonlocal received, complete
        if complete:
            return await receive()
        if rule is None:
            message = await receive()
        else:
            try:
                async with asyncio.timeout_at(rule.deadline(started, received)):
                    message = await receive()
            except TimeoutError:
                raise ServiceError(REQUEST_TIMEOUT, status=408, headers={"Connection": "close"}) from None
        if message["type"] == "http.request":
            chunk: bytes = message.get("body", b"")
            received += len(chunk)
            complete = not message.get("more_body", False)
            if scanner is not None and scanner.found_in(chunk):
                raise ServiceError(INVALID_TEXT, status=400)
        else:
            complete = True
        return message

    return guarded
