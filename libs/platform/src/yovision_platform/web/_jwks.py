"""An issuer's signing keys, from its JWKS (RFC 7517), kept in the process.

- The set is fetched on first use, then each key is kept by its `kid`.
- A `kid` the cache lacks fetches the set again at once, but at most once per `unknown_kid_interval`
  (a flood of made-up `kid`s costs one fetch, not one each). So a key the issuer adds is verifying on
  its first token.
- Once the set is older than `refresh_seconds`, it is fetched again in the background. So a key the issuer
  removed stops verifying within that time, and no request waits for the fetch.
- Only a fetch that succeeds replaces the keys. While the endpoint is down, the cached keys keep verifying.
- Only asymmetric keys of the allowed algorithms are kept, and each with its one algorithm. A symmetric
  (`oct`) key is never used, whatever the set holds.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from jwt import PyJWK, PyJWTError

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "JWKS_MAX_BYTES",
    "FetchOutcome",
    "IssuerKeys",
    "JwksKey",
]

# What a JWKS key may verify: the issuer signs, the services only hold public keys.
ASYMMETRIC_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384"})
JWKS_MAX_BYTES = 256 * 1024
FETCH_TIMEOUT_SECONDS = 5.0
REFRESH_SECONDS_DEFAULT = 300.0
UNKNOWN_KID_INTERVAL_SECONDS_DEFAULT = 10.0

log = logging.getLogger("yovision_platform.jwks")


class FetchOutcome(enum.Enum):
    FETCHED = "fetched"
    FAILED = "failed"


@dataclass(frozen=True)
class JwksKey:
    kid: str
    algorithm: str
    key: Any  # a cryptography public key


def parse_jwks(document: object, algorithms: Collection[str]) -> dict[str, JwksKey]:
    """The usable keys of a JWKS document by `kid`. A key without a `kid`, with another use than `sig`, of
    an algorithm not allowed, or that does not parse is left out; a document that is not a JWKS is a
    ValueError (the caller keeps what it had)."""
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWK set")
    keys: dict[str, JwksKey] = {}
    for entry in document["keys"]:
        if not isinstance(entry, Mapping) or entry.get("kty") not in ("RSA", "EC"):
            continue
        kid, use, alg = entry.get("kid"), entry.get("use", "sig"), entry.get("alg")
        if not isinstance(kid, str) or not kid or use != "sig" or "d" in entry:
            continue  # no id, an encryption key, or a private key published by mistake
        try:
            parsed = PyJWK(dict(entry), algorithm=alg if isinstance(alg, str) else None)
        except PyJWTError:
            continue
        if parsed.algorithm_name in algorithms:
            keys[kid] = JwksKey(kid, parsed.algorithm_name, parsed.key)
    return keys


@dataclass
class IssuerKeys:
    """The signing keys at `url` (see the module docstring). `on_fetch` is told every fetch's outcome (a
    metric); `clock` is monotonic seconds."""

    url: str
    algorithms: frozenset[str]
    http: httpx.AsyncClient
    refresh_seconds: float = REFRESH_SECONDS_DEFAULT
    unknown_kid_interval: float = UNKNOWN_KID_INTERVAL_SECONDS_DEFAULT
    on_fetch: Callable[[FetchOutcome], None] = lambda outcome: None
    clock: Callable[[], float] = time.monotonic
    _keys: dict[str, JwksKey] = field(default_factory=dict, init=False)
    _fetched_at: float | None = field(default=None, init=False)
    _attempted_at: float | None = field(default=None, init=False)
    _fetching: asyncio.Task[None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if unknown := self.algorithms - ASYMMETRIC_ALGORITHMS:
            raise ValueError(f"not asymmetric signature algorithms: {sorted(unknown)}")
        if not self.algorithms:
            raise ValueError("at least one algorithm is needed")

    async def key(self, kid: str) -> JwksKey | None:
        """The key `kid`, or None when the issuer has no such key (as far as a fetch allowed now shows)."""
        if self._fetched_at is None or kid not in self._keys:
            if self._fetching is not None and not self._fetching.done():
                # a fetch under way may bring the kid: a request that came while it ran waits for it,
                # rather than being refused for a key the answer in flight holds
                await asyncio.shield(self._fetching)
            elif self._attempted_at is None or self.clock() - self._attempted_at >= self.unknown_kid_interval:
                await self._fetch_once()
        elif self.clock() - self._fetched_at >= self.refresh_seconds:
            self._refresh_in_background()
        return self._keys.get(kid)

    async def settled(self) -> None:
        """Returns once no fetch is under way (a background refresh has ended)."""
        if self._fetching is not None:
            await asyncio.gather(asyncio.shield(self._fetching), return_exceptions=True)

    async def aclose(self) -> None:
        if self._fetching is not None:
            self._fetching.cancel()
            await asyncio.gather(self._fetching, return_exceptions=True)

    def _refresh_in_background(self) -> None:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.create_task(self._fetch())

    async def _fetch_once(self) -> None:
        """One fetch at a time: concurrent callers wait for the one under way."""
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.create_task(self._fetch())
        await asyncio.shield(self._fetching)

    async def _fetch(self) -> None:
        self._attempted_at = self.clock()
        try:
            keys = parse_jwks(await self._document(), self.algorithms)
        except (httpx.HTTPError, ValueError):
            self.on_fetch(FetchOutcome.FAILED)
            log.warning("jwks_fetch_failed", extra={"jwks_url": self.url})
            return
        self._keys, self._fetched_at = keys, self.clock()
        self.on_fetch(FetchOutcome.FETCHED)

    async def _document(self) -> object:
        async with self.http.stream("GET", self.url, timeout=FETCH_TIMEOUT_SECONDS) as response:
            if response.status_code != 200:
                raise ValueError("the JWKS endpoint did not answer 200")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > JWKS_MAX_BYTES:
                    raise ValueError("the JWK set is too large")
        return json.loads(body)
