from __future__ import annotations

import ipaddress

import pytest

from signal_watcher.domain.errors import UrlRefused
from signal_watcher.domain.ssrf import (
    STRICT_GUARD,
    URL_MAX_CHARS,
    AddressGuard,
    check_url,
    is_blocked_address,
)

REFUSED_URLS = [
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://example.com/",
    "http://user:pw@example.com/",
    "http://user@example.com/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://a.localhost/",
    "http://printer.local/",
    "http://db.internal/",
    "http://intranet/",
    "http://127.0.0.1/",
    "http://127.1/",
    "http://127.0.1/",
    "http://0x7f000001/",
    "http://0x7f.0.0.1/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://0.0.0.0/",
    "http://0/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://169.254.169.254/",
    "http://224.0.0.1/",
    "http://239.255.255.250/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fe80::1]/",
    "http://[2606:4700:4700::1111]/",
    "http://exa mple.com/",
    "http://example.com\\@evil/",
    "not a url",
    "",
]


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_unsafe_urls_are_refused(url: str) -> None:
    with pytest.raises(UrlRefused):
        check_url(url)


@pytest.mark.parametrize(
    "url",
    ["http://example.com/", "https://api.example.com:8443/v1?q=1", "http://93.184.216.34/", "HTTPS://Ex.COM"],
)
def test_public_urls_are_accepted(url: str) -> None:
    assert check_url(url).host


def test_url_length_limit() -> None:
    base = "https://example.com/"
    assert check_url(base + "a" * (URL_MAX_CHARS - len(base)))
    with pytest.raises(UrlRefused):
        check_url(base + "a" * (URL_MAX_CHARS - len(base) + 1))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "0.0.0.0",  # noqa: S104
        "0.1.2.3",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.0.1",
        "192.168.0.1",
        "100.64.0.0",
        "100.127.255.255",
        "169.254.0.1",
        "224.0.0.1",
        "239.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::127.0.0.1",
        "::8.8.8.8",
        "64:ff9b::a00:1",
        "2002:7f00:1::",
        "fc00::1",
        "fdff::1",
        "fe80::1",
        "febf::1",
        "fec0::1",
        "192.88.99.1",
        "2001:db8::1",
        "ff02::1",
    ],
)
def test_blocked_addresses(address: str) -> None:
    assert is_blocked_address(ipaddress.ip_address(address))
    with pytest.raises(UrlRefused) as exc:
        STRICT_GUARD.check(ipaddress.ip_address(address))
    assert exc.value.code == "ssrf_blocked_address"


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "93.184.216.34",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "2606:4700::1111",
    ],
)
def test_public_addresses_pass(address: str) -> None:
    assert not is_blocked_address(ipaddress.ip_address(address))


def test_loopback_test_guard_allows_only_ipv4_loopback() -> None:
    guard = AddressGuard(allow_loopback=True)
    guard.check(ipaddress.ip_address("127.0.0.1"))
    for address in ("10.0.0.1", "::1", "169.254.169.254"):
        with pytest.raises(UrlRefused):
            guard.check(ipaddress.ip_address(address))
