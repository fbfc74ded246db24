from __future__ import annotations

import ipaddress

import pytest

from signal_watcher.domain.errors import NetworkConfined, UrlRefused
from signal_watcher.domain.ssrf import (
    PORT_MAX,
    PORT_MIN,
    STRICT_GUARD,
    URL_MAX_CHARS,
    AddressGuard,
    check_url,
    is_blocked_address,
    parse_networks,
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


LOOPBACK_ALLOWED = AddressGuard.allowing(parse_networks("127.0.0.0/8"))


@pytest.mark.parametrize(("port", "expected"), [("1", 1), ("65535", 65535), ("080", 80), ("", 80)])
def test_ports_from_1_to_65535_are_accepted(port: str, expected: int) -> None:
    assert (PORT_MIN, PORT_MAX) == (1, 65535)
    assert check_url(f"http://example.com:{port}/a").port == expected


@pytest.mark.parametrize(
    "port",
    ["0", "00000", "65536", "99999", "12345678901234567890", "+80", "8_0", "-1", "\u0668\u0660", "065535"],
)
def test_ports_outside_1_to_65535_or_not_1_to_5_ascii_digits_are_refused(port: str) -> None:
    for url in (f"http://example.com:{port}/", f"https://93.184.216.34:{port}"):
        with pytest.raises(UrlRefused) as exc:
            check_url(url)
        assert exc.value.code == "url_port_invalid", url


def test_the_default_guard_allows_no_network_and_refuses_loopback() -> None:
    assert STRICT_GUARD.allowed_networks == () and AddressGuard() == STRICT_GUARD
    with pytest.raises(UrlRefused) as exc:
        check_url("http://127.0.0.1:8080/")
    assert exc.value.code == "ssrf_blocked_address"


def test_an_allowed_network_admits_its_addresses_and_nothing_else() -> None:
    for inside in ("127.0.0.1", "127.255.255.254"):
        LOOPBACK_ALLOWED.check(ipaddress.ip_address(inside))
    for outside in ("10.0.0.1", "169.254.169.254", "::1", "::ffff:127.0.0.1", "0.0.0.0"):  # noqa: S104
        with pytest.raises(UrlRefused):
            LOOPBACK_ALLOWED.check(ipaddress.ip_address(outside))
    LOOPBACK_ALLOWED.check(ipaddress.ip_address("8.8.8.8"))  # public addresses stay reachable


def test_an_allowed_network_makes_its_canonical_literals_acceptable_but_not_names_or_odd_spellings() -> None:
    target = check_url("http://127.0.0.1:8080/x", LOOPBACK_ALLOWED)
    assert (target.host, target.port, str(target.address)) == ("127.0.0.1", 8080, "127.0.0.1")
    for url, code in [
        ("http://localhost:8080/", "ssrf_blocked_name"),
        ("http://a.localhost/", "ssrf_blocked_name"),
        ("http://intranet/", "ssrf_blocked_name"),
        ("http://127.1/", "ssrf_ambiguous_ip"),
        ("http://2130706433/", "ssrf_ambiguous_ip"),
        ("http://[::1]/", "ssrf_ipv6_literal"),
        ("http://10.0.0.1/", "ssrf_blocked_address"),
        ("http://127.0.0.1:65536/", "url_port_invalid"),
    ]:
        with pytest.raises(UrlRefused) as exc:
            check_url(url, LOOPBACK_ALLOWED)
        assert exc.value.code == code, url


@pytest.mark.parametrize(
    ("text", "networks"),
    [
        ("", []),
        ("  ", []),
        ("127.0.0.0/8", ["127.0.0.0/8"]),
        (" 127.0.0.0/8 , 10.1.0.0/16,127.0.0.0/8", ["127.0.0.0/8", "10.1.0.0/16"]),
        ("::1/128", ["::1/128"]),
    ],
)
def test_allowed_networks_are_comma_separated_cidrs(text: str, networks: list[str]) -> None:
    assert [str(n) for n in parse_networks(text)] == networks


@pytest.mark.parametrize(
    "text",
    ["127.0.0.1", "127.0.0.1/8", "localhost/8", "127.0.0.0/33", "127.0.0.0/8,", "10.0.0.0/8;1.0.0.0/8"],
)
def test_malformed_allowed_networks_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="CIDR"):
        parse_networks(text)


# --- confinement (SIGNAL_PROBE_ONLY_NETWORKS) -----------------------------------------------------------

CONFINED = AddressGuard.allowing(parse_networks("127.0.0.1/32")).confined_to(
    parse_networks("127.0.0.0/8,::1/128")
)  # as the end-to-end environments: allow 127.0.0.1, confine to loopback


def _code(guard: AddressGuard, address: str) -> str | None:
    try:
        guard.check(ipaddress.ip_address(address))
    except UrlRefused as exc:
        return exc.code
    return None


def test_an_unconfined_guard_lets_public_addresses_through() -> None:
    assert not STRICT_GUARD.is_confined and STRICT_GUARD.only_networks == ()
    assert STRICT_GUARD.confined_to([]) == STRICT_GUARD
    assert _code(STRICT_GUARD, "93.184.216.34") is None


@pytest.mark.parametrize(
    ("address", "code"),
    [
        ("127.0.0.1", None),  # allowed and inside
        ("93.184.216.34", "probe_network_confined"),  # public: the SSRF rule admits it, the confinement not
        ("8.8.8.8", "probe_network_confined"),
        ("2606:4700::1111", "probe_network_confined"),
        ("128.0.0.0", "probe_network_confined"),  # just past 127.255.255.255
        ("126.255.255.255", "probe_network_confined"),  # just before 127.0.0.0
        ("127.0.0.2", "ssrf_blocked_address"),  # inside, but the SSRF rule refuses it first
        ("10.0.0.1", "ssrf_blocked_address"),  # outside and blocked: the SSRF code wins
        ("::1", "ssrf_blocked_address"),  # inside ::1/128, not allow-listed
        ("::ffff:127.0.0.1", "ssrf_blocked_address"),
    ],
)
def test_a_confined_guard_checks_the_ssrf_rule_then_the_listed_networks(address: str, code: str) -> None:
    assert _code(CONFINED, address) == code


@pytest.mark.parametrize(
    ("address", "code"),
    [
        ("127.0.0.0", None),  # first address of the network
        ("127.255.255.255", None),  # last
        ("::1", None),
        ("128.0.0.0", "probe_network_confined"),
        ("126.255.255.255", "probe_network_confined"),
        ("::2", "probe_network_confined"),
        ("::ffff:127.0.0.1", "probe_network_confined"),  # IPv4-mapped: matched as IPv6, not by 127.0.0.0/8
    ],
)
def test_confinement_holds_at_the_edges_of_its_networks(address: str, code: str) -> None:
    everything = parse_networks("0.0.0.0/0,::/0")  # the SSRF rule out of the way: confinement alone
    guard = AddressGuard.allowing(everything).confined_to(parse_networks("127.0.0.0/8,::1/128"))
    assert _code(guard, address) == code


def test_every_answer_is_checked_and_a_blocked_one_keeps_its_ssrf_code() -> None:
    addresses = [ipaddress.ip_address(a) for a in ("127.0.0.1", "93.184.216.34")]
    with pytest.raises(NetworkConfined):
        CONFINED.check_all(addresses)
    with pytest.raises(UrlRefused) as exc:
        CONFINED.check_all([*addresses, ipaddress.ip_address("10.0.0.1")])
    assert exc.value.code == "ssrf_blocked_address" and not isinstance(exc.value, NetworkConfined)
    CONFINED.check_all([ipaddress.ip_address("127.0.0.1")])


def test_a_public_literal_outside_the_confinement_is_refused_by_the_url_check() -> None:
    with pytest.raises(NetworkConfined) as exc:
        check_url("http://93.184.216.34/", CONFINED)
    assert (exc.value.status, exc.value.code) == (403, "probe_network_confined")
    assert check_url("http://93.184.216.34/").address is not None  # unconfined: accepted
    target = check_url("https://example.com/", CONFINED)  # a name: its addresses are checked when resolved
    assert target.address is None
