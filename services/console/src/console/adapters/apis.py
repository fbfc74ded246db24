"""HTTP clients of the five services' public APIs, acting with the signed-in user's identity.

Every call carries the signed-in user's own access token (one token of the OpenID provider, for the five
services' audiences), so each service, Sense included, sees and audits the user who acts; the console holds
no credential of its own. Tokens live only in request headers: never in a page, a log or a URL.
An error answer becomes :class:`ApiError` with the service's stable ``code`` and field names, never its
input values.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from console.domain.identity import User

SENSE = "sense-reconciler"
PROMETHEUS = "prometheus"  # in `urls` when configured; only `raw` reads it (no user token goes there)


class ApiError(Exception):
    """A service's refusal or absence: its name, the HTTP status, its stable ``code`` and the names of the
    fields it refused. A plain exception (not a frozen dataclass): Starlette clears ``__traceback__`` on
    every exception its handlers answered, and a frozen instance refuses that assignment."""

    def __init__(self, service: str, status: int, code: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(service, status, code, fields)
        self.service = service
        self.status = status
        self.code = code
        self.fields = fields

    def __str__(self) -> str:
        return f"{self.service}: {self.status} {self.code}"


@dataclass
class Apis:
    urls: Mapping[str, str]
    timeout_seconds: float = 10.0
    _http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(
            timeout=self.timeout_seconds, limits=httpx.Limits(max_connections=100), follow_redirects=False
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @staticmethod
    def _headers(user: User | None) -> dict[str, str]:
        return {} if user is None else {"Authorization": f"Bearer {user.token}"}

    async def call(
        self,
        service: str,
        method: str,
        path: str,
        user: User | None,
        *,
        params: Any = None,
        json: Any = None,
        content: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The JSON answer (None for 204); ApiError for any 4xx/5xx; ApiError(503, unavailable) when the
        service does not answer."""
        try:
            response = await self._http.request(
                method,
                self.urls[service] + path,
                params=params,
                json=json,
                content=content,
                headers={**self._headers(user), **(headers or {})},
            )
        except httpx.HTTPError:
            raise ApiError(service, 503, "service_unavailable") from None
        if response.status_code >= 400:
            raise _error(service, response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    async def get(self, service: str, path: str, user: User | None, **params: Any) -> Any:
        clean = {k: v for k, v in params.items() if v not in (None, "")}
        return await self.call(service, "GET", path, user, params=clean)

    async def raw(self, service: str, path: str) -> httpx.Response | None:
        """An unauthenticated GET (``/readyz``, ``/metrics``); None when the service does not answer."""
        try:
            return await self._http.get(self.urls[service] + path, timeout=3.0)
        except httpx.HTTPError:
            return None

    async def stream(
        self, service: str, path: str, user: User, headers: Mapping[str, str]
    ) -> tuple[httpx.Response, AsyncIterator[bytes]]:
        """A streamed GET (media outputs, Range passed through); the caller closes the response."""
        request = self._http.build_request(
            "GET", self.urls[service] + path, headers={**self._headers(user), **headers}
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError:
            raise ApiError(service, 503, "service_unavailable") from None
        if response.status_code >= 400:
            await response.aread()
            await response.aclose()
            raise _error(service, response)
        return response, response.aiter_bytes()


async def concurrently(*reads: Awaitable[Any]) -> list[Any]:
    """Independent API reads of one page, at the same time; their answers in order. Each read runs to its
    end (none is left behind a failed one), then the first ApiError in argument order is raised."""
    answers = await asyncio.gather(*reads, return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
    return answers


async def optional(read: Awaitable[Any]) -> Any:
    """The answer of a read the page can do without, or None when the service refused it."""
    try:
        return await read
    except ApiError:
        return None


def _error(service: str, response: httpx.Response) -> ApiError:
    code: str = "error"
    fields: tuple[str, ...] = ()
    try:
        body = response.json()
        if isinstance(body, dict):
            code = str(body.get("code") or body.get("error") or code)
            raw_fields = body.get("fields") or ()
            fields = tuple(str(f) for f in raw_fields if isinstance(f, str))
    except ValueError:
        pass
    return ApiError(service, response.status_code, code, fields)
