"""The probe client: one HTTP request per check, SSRF-safe including DNS rebinding.

How the connect-time check works: httpx hands the request to `_GuardedTransport`, whose httpcore pool uses
`GuardedNetworkBackend`. For each new connection the backend resolves the host **once** through the
`Resolver` port, checks **every** returned address with the `AddressGuard` (the SSRF rule, then the network
confinement when `SIGNAL_PROBE_ONLY_NETWORKS` is set), and only then connects to one of those checked
addresses by IP: a refused answer never reaches the socket layer. Nothing resolves the name again, so an
answer that changes between check and connect cannot redirect the probe. TLS still uses the original name
for SNI and certificate checks, and the `Host` header keeps the original name, because httpcore takes both
from the request URL, not the socket.

Limits: connect 10 s, read 15 s (per read), a 60 s overall deadline, at most 1 MiB of body read while
streaming (the response is closed, and its connection dropped, as soon as the cap is passed). Redirects are
not followed: a 3xx is the failure `redirect`. Any other completed status is returned for judging.
Failures carry only a stable code (`ProbeFailed.code`), never the URL, headers or body. The service layer
(`probe_and_judge`) turns any other exception into `probe_internal_error`, so no probe can crash a check.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Sequence

import httpcore
import httpx

from signal_watcher.adapters.resolvers import Resolver, system_resolver
from signal_watcher.domain.errors import NetworkConfined, UrlRefused
from signal_watcher.domain.model import Header
from signal_watcher.domain.probes import ProbeFailed, ProbeResponse
from signal_watcher.domain.ssrf import STRICT_GUARD, AddressGuard, IpAddress, ProbeTarget, check_url

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "MAX_BODY_BYTES",
    "READ_TIMEOUT_SECONDS",
    "GuardedNetworkBackend",
    "ProbeClient",
    "probe_target",
]

CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 15.0
WRITE_TIMEOUT_SECONDS = 15.0
TOTAL_DEADLINE_SECONDS = 60.0
MAX_BODY_BYTES = 1024 * 1024
MAX_CONNECTIONS = 200
# Idle connections kept for reuse. On every request httpcore asks each pooled connection whether it has
# expired (an idle one: a poll of its socket through anyio's attribute table), so a pool that keeps all 200
# costs every probe a scan of 200; checks of one origin are minutes apart, longer than the keep-alive, so
# the kept ones are rarely reused anyway. Measured (issue 25): 8-15 % less CPU per probe than keeping 200.
MAX_KEEPALIVE_CONNECTIONS = 20
KEEPALIVE_EXPIRY_SECONDS = 5.0
USER_AGENT = "yovision-signal-watcher/1"


def probe_target(url: str, guard: AddressGuard) -> ProbeTarget:
    """`check_url` before a probe: a stored URL that breaks a rule now is the probe failure `url_refused`,
    an IP literal outside the confinement `probe_network_confined`."""
    try:
        return check_url(url, guard)
    except NetworkConfined:
        raise ProbeFailed(NetworkConfined.code) from None
    except UrlRefused:
        raise ProbeFailed("url_refused") from None


class GuardedNetworkBackend(httpcore.AsyncNetworkBackend):
    """Resolve once, check every address, connect to a checked address."""

    def __init__(self, resolver: Resolver, guard: AddressGuard) -> None:
        self._resolver = resolver
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()

    @property
    def guard(self) -> AddressGuard:
        return self._guard

    async def resolve_checked(self, host: str, port: int, limit_seconds: float | None) -> list[IpAddress]:
        try:
            literal: IpAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            addresses: list[IpAddress] = [literal]
        else:
            try:
                addresses = list(await asyncio.wait_for(self._resolver(host, port), limit_seconds))
            except TimeoutError:
                raise ProbeFailed("timeout") from None
            except Exception:  # the resolver is a port: any failure of it means "no usable answer"
                raise ProbeFailed("dns") from None
        if not addresses:
            raise ProbeFailed("dns")
        try:
            self._guard.check_all(addresses)
        except NetworkConfined:
            raise ProbeFailed(NetworkConfined.code) from None
        except UrlRefused:
            raise ProbeFailed("ssrf_blocked") from None
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self.resolve_checked(host, port, timeout)
        last_error: Exception = ProbeFailed("connect_failed")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        raise last_error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ProbeFailed("connect_failed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _causes(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _code_for(exc: Exception) -> str:
    if isinstance(exc, httpcore.TimeoutException):
        return "timeout"
    if isinstance(exc, httpcore.ConnectError):
        causes = list(_causes(exc))
        if any(isinstance(c, ssl.SSLError) for c in causes):
            return "tls"
        return (
            "connect_refused"
            if any(isinstance(c, ConnectionRefusedError) for c in causes)
            else "connect_failed"
        )
    if isinstance(exc, ssl.SSLError):
        return "tls"
    return "protocol_error"


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterator[bytes] | object) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert hasattr(self._stream, "__aiter__")
        try:
            async for chunk in self._stream:
                yield chunk
        except httpcore.TimeoutException:
            raise ProbeFailed("timeout") from None
        except httpcore.ProtocolError:
            raise ProbeFailed("protocol_error") from None
        except httpcore.NetworkError:
            raise ProbeFailed("connect_failed") from None

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class _GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(self, backend: GuardedNetworkBackend) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl.create_default_context(),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except (
            httpcore.TimeoutException,
            httpcore.NetworkError,
            httpcore.ProtocolError,
            ssl.SSLError,
        ) as exc:
            raise ProbeFailed(_code_for(exc)) from None
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class ProbeClient:
    """Runs probes. Production passes the guard built from `SIGNAL_PROBE_ALLOWED_NETWORKS` (strict when it
    is empty) and `SIGNAL_PROBE_ONLY_NETWORKS` (not confined when unset) and the resolver of
    `SIGNAL_PROBE_RESOLVER` (`adapters/resolvers.py`); tests inject a fake resolver and a confined guard.
    The same guard checks the URL (create, update, every probe) and every resolved address at connect
    time. Close with `aclose()`."""

    def __init__(
        self,
        *,
        resolver: Resolver = system_resolver,
        guard: AddressGuard = STRICT_GUARD,
        read_timeout_seconds: float = READ_TIMEOUT_SECONDS,
    ) -> None:
        self.guard = guard
        self._backend = GuardedNetworkBackend(resolver, guard)
        self._client = httpx.AsyncClient(
            transport=_GuardedTransport(self._backend),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(
                connect=CONNECT_TIMEOUT_SECONDS,
                read=read_timeout_seconds,
                write=WRITE_TIMEOUT_SECONDS,
                pool=CONNECT_TIMEOUT_SECONDS,
            ),
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
        )

    async def preflight(self, url: str) -> None:
        """URL rules plus resolving the name now and checking every address (create/update time)."""
        target = check_url(url, self.guard)
        await self._backend.resolve_checked(target.host, target.port, CONNECT_TIMEOUT_SECONDS)

    async def probe(
        self, method: str, url: str, headers: Sequence[Header], body: str | None
    ) -> ProbeResponse:
        """One request. Returns the status and at most MAX_BODY_BYTES of body; ProbeFailed otherwise."""
        probe_target(url, self.guard)
        started = time.monotonic()
        try:
            async with asyncio.timeout(TOTAL_DEADLINE_SECONDS):
                status, data = await self._request(method, url, headers, body)
        except TimeoutError:
            raise ProbeFailed("timeout") from None
        except httpx.HTTPError:
            raise ProbeFailed("protocol_error") from None
        return ProbeResponse(status, data, int((time.monotonic() - started) * 1000))

    async def _request(
        self, method: str, url: str, headers: Sequence[Header], body: str | None
    ) -> tuple[int, bytes]:
        request_headers = [(h.key, h.value) for h in headers]
        content = body.encode() if body is not None else None
        async with self._client.stream(method, url, headers=request_headers, content=content) as response:
            if response.is_redirect or 300 <= response.status_code < 400:
                raise ProbeFailed("redirect")
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise ProbeFailed("too_large")
            received = bytearray()
            async for chunk in response.aiter_raw():
                received += chunk
                if len(received) > MAX_BODY_BYTES:
                    raise ProbeFailed("too_large")
            return response.status_code, bytes(received)

    async def aclose(self) -> None:
        await self._client.aclose()
