"""The probe's resolvers: the hosts-file one answers from the file alone and never sends a packet."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from signal_watcher.adapters.resolvers import (
    ProbeResolver,
    hosts_file_resolver,
    resolver_of,
    system_resolver,
)

HOSTS = """\
# comment line
127.0.0.1   localhost  target.test   # a trailing comment
::1         localhost ip6-localhost
10.1.2.3    Other.Test
not-an-ip   broken.test
fe80::1%eth0 zoned.test
127.0.0.1   target.test
"""


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every attempt to resolve or connect through the socket module, recorded and refused."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise AssertionError("the hosts-file resolver touched the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    path = tmp_path / "hosts"
    path.write_text(HOSTS, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("localhost", ["127.0.0.1", "::1"]),
        ("LOCALHOST.", ["127.0.0.1", "::1"]),
        ("target.test", ["127.0.0.1"]),
        ("other.test", ["10.1.2.3"]),
        ("zoned.test", ["fe80::1"]),
    ],
)
async def test_a_listed_name_has_the_addresses_of_its_lines_and_no_packet_is_sent(
    hosts: Path, no_network: list[object], name: str, expected: list[str]
) -> None:
    addresses = await hosts_file_resolver(hosts)(name, 80)
    assert addresses == [ipaddress.ip_address(a) for a in expected]
    assert no_network == []


@pytest.mark.parametrize("name", ["example.com", "broken.test", "comment", "trailing", "tar"])
async def test_a_name_the_file_does_not_list_has_no_address_and_no_dns_query(
    hosts: Path, no_network: list[object], name: str
) -> None:
    with pytest.raises(LookupError):
        await hosts_file_resolver(hosts)(name, 80)
    assert no_network == []


async def test_an_edit_of_the_file_takes_effect_at_once(hosts: Path, no_network: list[object]) -> None:
    resolve = hosts_file_resolver(hosts)
    with pytest.raises(LookupError):
        await resolve("new.test", 80)
    hosts.write_text(HOSTS + "127.0.0.2 new.test\n", encoding="utf-8")  # noqa: ASYNC240 - a test file
    assert await resolve("new.test", 80) == [ipaddress.ip_address("127.0.0.2")]


def test_the_setting_picks_the_resolver() -> None:
    assert resolver_of(ProbeResolver.SYSTEM) is system_resolver
    assert resolver_of(ProbeResolver.HOSTS_FILE) is not system_resolver
