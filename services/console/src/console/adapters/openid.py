"""The OpenID provider as the console's client sees it: discovery, the authorization URL, the token endpoint
(code exchange and refresh, `client_secret_basic`), revocation, RP-initiated logout, and ID tokens.

- The discovery document (`<issuer>/.well-known/openid-configuration`) is fetched on first use, kept, and
  fetched again after `DISCOVERY_MAX_AGE_SECONDS`; while a new fetch fails, the kept one is used. Its
  `issuer` must be the configured one, and every endpoint https (http on loopback only).
- ID tokens are verified as every service verifies access tokens (`access_tokens.verified_claims`, against
  the issuer's JWKS through `yovision_platform.web.IssuerKeys`: an allowed asymmetric algorithm, the
  `kid`'s own algorithm, no key named by the token itself, `iss`, `sub` and the times), with `aud` = the
  client id (and `azp` when `aud` names others) and the `nonce` of the sign-in.

Errors: `ProviderUnavailable` (no answer, a 5xx, an answer of the wrong shape), `GrantRefused` (the
provider refused a code, a refresh token: its `error` code when it is a known one) and `IdTokenInvalid`.
None of them carries a token or a provider's free text.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import jwt

from console.domain.sign_in import AuthorizationRequest, TokenAnswer
from console.service_layer.ports import GrantRefused, IdTokenInvalid, ProviderUnavailable
from yovision_platform.web import (
    JWT_LEEWAY_SECONDS_DEFAULT,
    IssuerKeys,
    PermissionMapping,
    TokenRefused,
    checked_url,
    verified_claims,
)

__all__ = [
    "GrantRefused",
    "IdTokenInvalid",
    "OpenIdProvider",
    "ProviderMetadata",
    "ProviderUnavailable",
    "claimed_permissions",
    "origin_of",
]

DISCOVERY_MAX_AGE_SECONDS = 3600.0
ANSWER_MAX_BYTES = 64 * 1024
TOKEN_MAX_CHARS = 16 * 1024
EXPIRES_IN_MAX_SECONDS = 24 * 3600
ID_TOKEN_ALGORITHMS = frozenset({"RS256", "ES256"})
# OAuth 2.0 error codes a refusal is counted and logged by (RFC 6749 5.2); any other is "refused".
KNOWN_ERRORS = frozenset(
    {"invalid_grant", "invalid_client", "invalid_request", "unauthorized_client", "unsupported_grant_type"}
)


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True)
class ProviderMetadata:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    revocation_endpoint: str | None
    end_session_endpoint: str | None

    @classmethod
    def parse(cls, document: object, issuer: str) -> ProviderMetadata:
        if not isinstance(document, Mapping) or document.get("issuer") != issuer:
            raise ValueError("not the discovery document of the configured issuer")

        def url(name: str, *, required: bool = True) -> str | None:
            value = document.get(name)
            if value is None and not required:
                return None
            if not isinstance(value, str):
                raise ValueError(f"{name} missing")
            return checked_url(value)

        return cls(
            issuer,
            str(url("authorization_endpoint")),
            str(url("token_endpoint")),
            str(url("jwks_uri")),
            url("revocation_endpoint", required=False),
            url("end_session_endpoint", required=False),
        )

    def origins(self) -> frozenset[str]:
        """Where the browser is sent: the authorization and the end-session endpoints' origins."""
        urls = [self.issuer, self.authorization_endpoint, self.end_session_endpoint]
        return frozenset(origin_of(u) for u in urls if u)


class OpenIdProvider:
    """The console's client at the provider `issuer` (see the module docstring). `http` is the caller's
    (closed by it); `monotonic` times the discovery document's age."""

    def __init__(
        self,
        issuer: str,
        client_id: str,
        client_secret: str,
        http: httpx.AsyncClient,
        *,
        algorithms: Collection[str] = ID_TOKEN_ALGORITHMS,
        leeway_seconds: int = JWT_LEEWAY_SECONDS_DEFAULT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.client_id = client_id
        self._secret = client_secret
        self._http = http
        self._algorithms = frozenset(algorithms)
        self._leeway = leeway_seconds
        self._monotonic = monotonic
        self._metadata: ProviderMetadata | None = None
        self._fetched_at = 0.0
        self._fetching: asyncio.Task[ProviderMetadata] | None = None
        self._keys: IssuerKeys | None = None

    # --- discovery -------------------------------------------------------------------------------------

    async def metadata(self) -> ProviderMetadata:
        kept = self._metadata
        if kept is not None and self._monotonic() - self._fetched_at < DISCOVERY_MAX_AGE_SECONDS:
            return kept
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.create_task(self._discover())
        try:
            return await asyncio.shield(self._fetching)
        except ProviderUnavailable:
            if kept is not None:
                return kept
            raise

    async def _discover(self) -> ProviderMetadata:
        answer = await self._request("GET", f"{self.issuer}/.well-known/openid-configuration")
        if answer.status_code != 200:
            raise ProviderUnavailable()
        try:
            metadata = ProviderMetadata.parse(_json(answer), self.issuer)
        except ValueError:
            raise ProviderUnavailable() from None
        if self._keys is None or self._keys.url != metadata.jwks_uri:
            self._keys = IssuerKeys(metadata.jwks_uri, self._algorithms, self._http)
        self._metadata, self._fetched_at = metadata, self._monotonic()
        return metadata

    def origins(self) -> frozenset[str]:
        """The origins the browser is sent to for signing in and out, as far as known now (the issuer's
        until the discovery document is read)."""
        known = self._metadata
        return known.origins() if known is not None else frozenset({origin_of(self.issuer)})

    # --- the browser's way there and back ---------------------------------------------------------------

    async def authorization_url(self, request: AuthorizationRequest) -> str:
        metadata = await self.metadata()
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": request.redirect_uri,
                "scope": " ".join(request.scopes),
                "audience": " ".join(request.audiences),
                "state": request.state,
                "nonce": request.nonce,
                "code_challenge": request.code_challenge,
                "code_challenge_method": "S256",
            }
        )
        return _with_query(metadata.authorization_endpoint, query)

    async def end_session_url(
        self, *, id_token_hint: str, post_logout_redirect_uri: str, state: str
    ) -> str | None:
        """RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0), or None when the provider has no
        end-session endpoint."""
        metadata = await self.metadata()
        if metadata.end_session_endpoint is None:
            return None
        query = urlencode(
            {
                "id_token_hint": id_token_hint,
                "post_logout_redirect_uri": post_logout_redirect_uri,
                "state": state,
            }
        )
        return _with_query(metadata.end_session_endpoint, query)

    # --- the token endpoint ------------------------------------------------------------------------------

    async def exchange_code(self, code: str, *, redirect_uri: str, verifier: str) -> TokenAnswer:
        return await self._grant(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            }
        )

    async def refresh(self, refresh_token: str) -> TokenAnswer:
        return await self._grant({"grant_type": "refresh_token", "refresh_token": refresh_token})

    async def revoke(self, refresh_token: str) -> bool:
        """Revokes the refresh token (RFC 7009; the provider revokes its access tokens with it). False when
        the provider has no revocation endpoint or did not confirm."""
        metadata = await self.metadata()
        if metadata.revocation_endpoint is None:
            return False
        answer = await self._request(
            "POST",
            metadata.revocation_endpoint,
            data={"token": refresh_token, "token_type_hint": "refresh_token"},
            auth=(self.client_id, self._secret),
        )
        return answer.status_code == 200

    async def _grant(self, form: dict[str, str]) -> TokenAnswer:
        metadata = await self.metadata()
        answer = await self._request(
            "POST", metadata.token_endpoint, data=form, auth=(self.client_id, self._secret)
        )
        if answer.status_code in (400, 401):
            error = _json_or_none(answer)
            code = error.get("error") if isinstance(error, Mapping) else None
            raise GrantRefused(code if code in KNOWN_ERRORS else "refused")
        if answer.status_code != 200:
            raise ProviderUnavailable()
        try:
            return _token_answer(_json(answer))
        except ValueError:
            raise ProviderUnavailable() from None

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = await self._http.request(method, url, **kwargs)
        except httpx.HTTPError:
            raise ProviderUnavailable() from None
        if len(answer.content) > ANSWER_MAX_BYTES:
            raise ProviderUnavailable()
        return answer

    # --- ID tokens ---------------------------------------------------------------------------------------

    async def verify_id_token(self, id_token: str, *, nonce: str) -> dict[str, Any]:
        """The ID token's claims, every check passed (the module docstring); else IdTokenInvalid."""
        await self.metadata()
        assert self._keys is not None
        try:
            claims = await verified_claims(
                id_token, self._keys, issuer=self.issuer, audience=self.client_id, leeway_seconds=self._leeway
            )
        except TokenRefused:
            raise IdTokenInvalid() from None
        audience = claims["aud"]
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.client_id:
            raise IdTokenInvalid()
        presented = claims.get("nonce")
        if not isinstance(presented, str) or not hmac.compare_digest(presented.encode(), nonce.encode()):
            raise IdTokenInvalid()
        return claims

    async def aclose(self) -> None:
        if self._fetching is not None and not self._fetching.done():
            self._fetching.cancel()
            await asyncio.gather(self._fetching, return_exceptions=True)
        if self._keys is not None:
            await self._keys.aclose()


def claimed_permissions(mapping: PermissionMapping) -> Callable[[TokenAnswer], frozenset[str]]:
    """The permissions in the claims of the access token a token answer carries, read through `mapping`
    (for providers that grant them as roles or groups, not scopes). The token is read, not verified: it came
    straight from the token endpoint, over the connection the client authenticated on; every service
    verifies it before it counts."""

    def permissions(answer: TokenAnswer) -> frozenset[str]:
        try:
            claims = jwt.decode(answer.access_token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return frozenset()
        return mapping.permissions(claims)

    return permissions


def _with_query(endpoint: str, query: str) -> str:
    return f"{endpoint}{'&' if urlsplit(endpoint).query else '?'}{query}"


def _json(answer: httpx.Response) -> Any:
    try:
        return json.loads(answer.content)
    except ValueError:
        raise ValueError("not JSON") from None


def _json_or_none(answer: httpx.Response) -> Any:
    try:
        return json.loads(answer.content)
    except ValueError:
        return None


def _token_answer(body: object) -> TokenAnswer:
    if not isinstance(body, Mapping):
        raise ValueError("not an object")
    access, kind, expires_in = body.get("access_token"), body.get("token_type"), body.get("expires_in")
    if not isinstance(access, str) or not 0 < len(access) <= TOKEN_MAX_CHARS:
        raise ValueError("no access token")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise ValueError("not a bearer token")
    if (
        isinstance(expires_in, bool)
        or not isinstance(expires_in, int)
        or not 0 < expires_in <= EXPIRES_IN_MAX_SECONDS
    ):
        raise ValueError("no usable expires_in")
    optional: dict[str, str | None] = {}
    for name in ("refresh_token", "id_token", "scope"):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= TOKEN_MAX_CHARS):
            raise ValueError(f"{name} malformed")
        optional[name] = value
    return TokenAnswer(access, expires_in, optional["refresh_token"], optional["id_token"], optional["scope"])
