"""HTTP clients of the five services' public APIs, acting with the signed-in user's identity.

Outbound identity per service: Sense gets its operator token and ``X-Actor: console:<user>``; every other
service gets a bearer JWT for the user -- the forwarded one (production) or a short-lived dev token minted
like ``make dev-token`` (dev sign-in). Tokens live only in request headers: never in a page, a log or a URL.
An error answer becomes :class:`ApiError` with the service's stable ``code`` and field names, never its
input values.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from console.domain.identity import User
from yovision_platform.auth import TokenVerifier

DEV_TOKEN_TTL_SECONDS = 300
SENSE = "sense-reconciler"


@dataclass(frozen=True)
class ApiError(Exception):
    service: str
    status: int
    code: str
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.service}: {self.status} {self.code}"


@dataclass
class Apis:
    urls: Mapping[str, str]
    sense_token: str
    dev_minters: Mapping[str, TokenVerifier]
    timeout_seconds: float = 10.0
    _http: httpx.AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(
            timeout=self.timeout_seconds, limits=httpx.Limits(max_connections=100), follow_redirects=False
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def _headers(self, service: str, user: User | None) -> dict[str, str]:
        if service == SENSE:
            actor = f"console:{user.subject}" if user else "console"
            return {"Authorization": f"Bearer {self.sense_token}", "X-Actor": actor[:128]}
        if user is None:
            return {}
        if user.token is not None:
            return {"Authorization": f"Bearer {user.token}"}
        minted = self.dev_minters[service].mint(
            user.subject, user.permissions, ttl_seconds=DEV_TOKEN_TTL_SECONDS
        )
        return {"Authorization": f"Bearer {minted}"}

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
                headers={**self._headers(service, user), **(headers or {})},
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
            "GET", self.urls[service] + path, headers={**self._headers(service, user), **headers}
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
