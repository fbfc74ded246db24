"""SSRF rules: which probe URLs and which resolved addresses a probe may reach.

Two checks, both required:

- `check_url` (at create/update time and again before every probe): http/https only, no credentials, no
  IPv6 literals, a port of 1..65535 written as 1 to 5 ASCII digits, no
  `localhost`/`.localhost`/`.local`/`.internal`/single-label names, every numeric IPv4 spelling (`127.1`,
  `0x7f000001`, `2130706433`, `0177.0.0.1`) is decoded the way `inet_aton` (and so the system resolver)
  reads it and refused unless it is a canonical dotted quad that the guard lets through.
- `AddressGuard.check_all` on **every** address the name resolves to, at connect time (see
  `adapters.probe_client`), so a name that later resolves to a private address (DNS rebinding) is refused.

The guard refuses every non-public address, except addresses inside the operator's explicit allow-list
(`SIGNAL_PROBE_ALLOWED_NETWORKS`, empty by default). The allow-list opens addresses only: the name rules
above (`localhost`, single-label names, ...) and the IPv6-literal rule hold whatever it contains.

Separately, the guard may confine probes to listed networks (`SIGNAL_PROBE_ONLY_NETWORKS`, unset by
default; test environments set it to loopback): then every address must also lie inside one of them,
public ones included, or it is refused with `probe_network_confined` (`NetworkConfined`). Confinement is
checked after the SSRF rules, on the same addresses at the same moments (an IPv4 literal in `check_url`,
every resolved address at connect time), so it only ever narrows what the SSRF guard admits.

The URL is parsed with `httpx.URL`, the same parser the probe client uses, so the validated host is the host
that is connected to (no parser differential). Parsing is pure; nothing here does I/O.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, replace

import httpx

from signal_watcher.domain.errors import NetworkConfined, TargetForbidden, UrlRefused

__all__ = [
    "PORT_MAX",
    "PORT_MIN",
    "STRICT_GUARD",
    "URL_MAX_CHARS",
    "URL_PATTERN",
    "AddressGuard",
    "IpAddress",
    "IpNetwork",
    "ProbeTarget",
    "check_url",
    "is_blocked_address",
    "parse_networks",
]

URL_MAX_CHARS = 1024
ALLOWED_SCHEMES = frozenset({"http", "https"})
BLOCKED_NAME_SUFFIXES = (".localhost", ".local", ".internal")
BLOCKED_NAMES = frozenset({"localhost"})
PORT_MIN = 1
PORT_MAX = 65535
_PORT_TEXT = re.compile(r"[0-9]{1,5}")
_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
# The syntax `check_url` accepts (and the probe client parses the same way) as a JSON Schema pattern, for the
# published document: http(s), an ASCII host without userinfo, an optional port 1..65535, printable ASCII
# after it. Which hosts and addresses may be probed is the SSRF policy (403 `ssrf_*`), not syntax.
_LABEL = "(?![Xx][Nn]--)[A-Za-z0-9_-]+"  # httpx decodes an xn-- label as IDNA: only valid ones parse
_PORT = "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
URL_PATTERN = rf"^[Hh][Tt][Tt][Pp][Ss]?://(?:{_LABEL}\.)*{_LABEL}\.?(?::{_PORT}?)?(?:[/?#][!-\[\]-~]*)?$"
# The pattern's host, enforced: httpx also parses hosts the pattern refuses (a `*` in a label, found by the
# fuzzing with seed 15), and the API must refuse what its document says it refuses.
_HOST_SYNTAX = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}\.?")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_BLOCKED_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _IPV4_COMPATIBLE or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    return None


def is_blocked_address(address: IpAddress) -> bool:
    """True for every address a probe must never reach: non-global, private, reserved, loopback,
    link-local, multicast, unspecified, CGNAT, and IPv6 forms that embed such an IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None and (is_blocked_address(embedded) or address in _IPV4_COMPATIBLE):
            return True
    if any(address in network for network in _BLOCKED_NETWORKS if network.version == address.version):
        return True
    return bool(
        not address.is_global
        or address.is_private
        or address.is_reserved
        or address.is_multicast
        or address.is_link_local
        or address.is_loopback
        or address.is_unspecified
    )


def parse_networks(text: str) -> tuple[IpNetwork, ...]:
    """`"127.0.0.0/8, 10.1.0.0/16"` -> networks; ValueError for a malformed entry or one with host bits set
    (`127.0.0.1/8`), so a typo never opens more or other addresses than the operator wrote."""
    parts = [part.strip() for part in text.split(",")] if text.strip() else []
    networks: list[IpNetwork] = []
    for part in parts:
        if not part.isascii() or "/" not in part:
            raise ValueError("every entry must be a network in CIDR notation, e.g. 127.0.0.0/8")
        try:
            network = ipaddress.ip_network(part, strict=True)
        except ValueError:
            raise ValueError("every entry must be a network in CIDR notation without host bits") from None
        if network not in networks:
            networks.append(network)
    return tuple(networks)


def _within(address: IpAddress, networks: Iterable[IpNetwork]) -> bool:
    """`address` in one of `networks` of its own version (an IPv4-mapped IPv6 address is IPv6 only)."""
    return any(address in n for n in networks if n.version == address.version)


@dataclass(frozen=True)
class AddressGuard:
    """Which addresses probes may reach: the SSRF rule, then the confinement.

    SSRF: public addresses pass, plus any address inside `allowed_networks` (`SIGNAL_PROBE_ALLOWED_NETWORKS`;
    the default, and `STRICT_GUARD`, allow no network). Confinement: when `only_networks` is not empty
    (`SIGNAL_PROBE_ONLY_NETWORKS`), an address must also lie inside one of them. Production builds the guard
    once from the settings (see `settings`). An IPv4-mapped IPv6 address is matched as IPv6 only, so an IPv4
    network never lets its `::ffff:` spelling through, nor confines it."""

    allowed_networks: tuple[IpNetwork, ...] = ()
    only_networks: tuple[IpNetwork, ...] = ()

    @classmethod
    def allowing(cls, networks: Iterable[IpNetwork]) -> AddressGuard:
        return cls(tuple(networks))

    def confined_to(self, networks: Iterable[IpNetwork]) -> AddressGuard:
        """This guard, confined to `networks` (none: not confined)."""
        return replace(self, only_networks=tuple(networks))

    @property
    def is_confined(self) -> bool:
        return bool(self.only_networks)

    def allows(self, address: IpAddress) -> bool:
        return _within(address, self.allowed_networks)

    def check(self, address: IpAddress) -> None:
        """TargetForbidden (`ssrf_blocked_address`) or NetworkConfined, else nothing."""
        self.check_all((address,))

    def check_all(self, addresses: Iterable[IpAddress]) -> None:
        """Every address passes the SSRF rule, then every address the confinement: a set of answers with one
        blocked address is `ssrf_blocked_address` whatever else it holds."""
        checked = tuple(addresses)
        for address in checked:
            if not self.allows(address) and is_blocked_address(address):
                raise TargetForbidden("ssrf_blocked_address")
        if self.only_networks:
            for address in checked:
                if not _within(address, self.only_networks):
                    raise NetworkConfined()


STRICT_GUARD = AddressGuard()


@dataclass(frozen=True)
class ProbeTarget:
    scheme: str
    host: str
    port: int
    address: IpAddress | None  # set when the host is an IPv4 literal


def _ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    """The address `inet_aton` (and getaddrinfo) would read from `host`, or None for a name."""
    try:
        packed = socket.inet_aton(host)
    except OSError:
        return None
    return ipaddress.IPv4Address(packed)


def _port_of(raw: str, scheme: str) -> int:
    """The port as written in the authority (1..65535, ASCII digits only), or the scheme's default.

    httpx reads the port with `int()`, which also takes `+80`, `8_0`, non-ASCII digits and any size, so the
    text is checked here first; a port outside 1..65535 is `url_port_invalid`."""
    match = _AUTHORITY.match(raw)
    if match is None:
        raise UrlRefused("url_invalid")
    _, colon, text = match.group(1).partition(":")
    if not colon or text == "":
        return 443 if scheme == "https" else 80
    if _PORT_TEXT.fullmatch(text) is None or not PORT_MIN <= int(text) <= PORT_MAX:
        raise UrlRefused("url_port_invalid")
    return int(text)


def check_url(raw: str, guard: AddressGuard = STRICT_GUARD) -> ProbeTarget:
    """Validate a probe URL; raises UrlRefused with a stable code. Does not resolve names."""
    if not raw or len(raw) > URL_MAX_CHARS or not raw.isprintable() or any(c in raw for c in " \\\t"):
        raise UrlRefused("url_invalid")
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, ValueError, TypeError):
        raise UrlRefused("url_invalid") from None
    if url.scheme not in ALLOWED_SCHEMES:
        raise UrlRefused("url_scheme_not_allowed")
    if url.userinfo:
        raise UrlRefused("url_credentials_not_allowed")
    host = url.host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host:
        raise UrlRefused("url_invalid")
    if ":" in host:
        raise TargetForbidden("ssrf_ipv6_literal")
    port = _port_of(raw, url.scheme)
    authority = _AUTHORITY.match(raw)
    host_text = authority[1].rsplit(":", 1)[0] if authority is not None else ""
    if _HOST_SYNTAX.fullmatch(host_text) is None or not raw.isascii():  # after the checks with codes
        raise UrlRefused("url_invalid")
    literal = _ipv4_literal(host)
    if literal is not None:
        if str(literal) != host:
            raise TargetForbidden("ssrf_ambiguous_ip")
        guard.check(literal)
        return ProbeTarget(url.scheme, host, port, literal)
    if host.replace(".", "").isdigit() or host.startswith("0x"):
        raise TargetForbidden("ssrf_ambiguous_ip")
    if host in BLOCKED_NAMES or host.endswith(BLOCKED_NAME_SUFFIXES) or "." not in host:
        raise TargetForbidden("ssrf_blocked_name")
    return ProbeTarget(url.scheme, host, port, None)
