"""The probe's name resolution (the `Resolver` port of `probe_client`): the system's, or the hosts file only.

`SIGNAL_PROBE_RESOLVER=system` (the default) asks getaddrinfo, which sends a DNS query for any name the
hosts file does not have. `hosts_file` answers from a hosts file alone (`SIGNAL_PROBE_HOSTS_FILE`, default
`/etc/hosts`) and never sends a packet: a name it does not list has no address (the probe failure `dns`;
create accepts such a name, as it accepts any name that does not resolve yet). Test environments use it
with the loopback confinement, so no probe of a test, not even its DNS question about a name a fuzzer made
up, leaves the machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from signal_watcher.domain.probes import HOSTS_FILE, ProbeResolver
from signal_watcher.domain.ssrf import IpAddress

__all__ = ["HOSTS_FILE", "ProbeResolver", "Resolver", "hosts_file_resolver", "resolver_of", "system_resolver"]

# The port: every address of a host name (for a port), in the order to try them; any exception is "no
# usable answer" (the probe failure `dns`).
Resolver = Callable[[str, int], Awaitable[Sequence[IpAddress]]]


async def system_resolver(host: str, port: int) -> list[IpAddress]:
    """All addresses getaddrinfo returns for `host` (one resolution, in the resolver's order)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses: list[IpAddress] = []
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def hosts_file_resolver(path: Path = HOSTS_FILE) -> Resolver:
    """A resolver answering from the hosts file at `path`, read at each resolution (it is small, and an
    edit takes effect at once): the addresses of every line naming `host` (case-insensitive), in file
    order. LookupError when no line names it."""

    async def resolve(host: str, port: int) -> list[IpAddress]:
        wanted = host.rstrip(".").lower()
        text = await asyncio.to_thread(path.read_text, encoding="utf-8", errors="replace")
        addresses: list[IpAddress] = []
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2 or wanted not in (name.lower() for name in fields[1:]):
                continue
            try:
                address = ipaddress.ip_address(fields[0].split("%", 1)[0])
            except ValueError:
                continue
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise LookupError("not in the hosts file")
        return addresses

    return resolve


def resolver_of(kind: ProbeResolver, hosts_file: Path = HOSTS_FILE) -> Resolver:
    return system_resolver if kind is ProbeResolver.SYSTEM else hosts_file_resolver(hosts_file)
