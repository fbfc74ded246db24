from __future__ import annotations

import random
import re

import pytest

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import InvalidDeviceInput, SiteLimitReached
from sense_reconciler.domain.model import (
    check_site_capacity,
    validate_actor,
    validate_batch_size,
    validate_id,
    validate_max_video_channels,
    validate_name,
    validate_page_size,
    validate_path_name,
    validate_source_uri,
)
from sense_reconciler.domain.reconcile import PathAction, PathConfig, plan_ensure, retry_backoff_seconds
from sense_reconciler.domain.source_uri import SOURCE_URI_PATTERN


def test_site_limit_allows_1_to_128_and_defaults_to_16() -> None:
    assert limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT == 16
    assert validate_max_video_channels(1) == 1
    assert validate_max_video_channels(128) == 128
    for bad in (0, 129):
        with pytest.raises(InvalidDeviceInput) as err:
            validate_max_video_channels(bad)
        assert err.value.code == "invalid_max_video_channels"


@pytest.mark.parametrize(("enabled_now", "allowed"), [(15, True), (16, False), (17, False)])
def test_site_capacity_boundary_at_default_limit(enabled_now: int, allowed: bool) -> None:
    if allowed:
        check_site_capacity(enabled_now, 1, limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT)
    else:
        with pytest.raises(SiteLimitReached):
            check_site_capacity(enabled_now, 1, limits.SITE_MAX_VIDEO_CHANNELS_DEFAULT)


def test_site_capacity_counts_a_whole_batch() -> None:
    check_site_capacity(100, 28, 128)
    with pytest.raises(SiteLimitReached) as err:
        check_site_capacity(100, 29, 128)
    assert err.value.code == "site_video_channel_limit_reached"


def test_path_name_charset_and_length() -> None:
    assert validate_path_name("tenant-a_site.1-cam") == "tenant-a_site.1-cam"
    assert validate_path_name("site-1/cam-07") == "site-1/cam-07"
    assert validate_path_name("a" * limits.PATH_NAME_MAX_CHARS)
    assert limits.PATH_NAME_MAX_CHARS == 255
    bad_names = ("", "a" * (limits.PATH_NAME_MAX_CHARS + 1), "a//b", "/a", "a/", "a/../b", "sp ace", "ü")
    for bad in (*bad_names, "~regex", "all_others"):
        with pytest.raises(InvalidDeviceInput):
            validate_path_name(bad)


def test_ids_names_and_actor() -> None:
    assert validate_id("a" * limits.ID_MAX_CHARS, "tenant_id")
    with pytest.raises(InvalidDeviceInput) as err:
        validate_id("a" * (limits.ID_MAX_CHARS + 1), "tenant_id")
    assert err.value.code == "invalid_tenant_id"
    assert validate_name("  Lobby  ") == "Lobby"
    assert validate_name("x" * limits.DEVICE_NAME_MAX_CHARS)
    for bad in ("", "   ", "x" * (limits.DEVICE_NAME_MAX_CHARS + 1), "a\nb"):
        with pytest.raises(InvalidDeviceInput):
            validate_name(bad)
    assert validate_actor("operator:alice")
    with pytest.raises(InvalidDeviceInput):
        validate_actor("a" * (limits.ACTOR_MAX_CHARS + 1))


def test_source_uri_must_be_rtsp_with_host_and_never_echoed() -> None:
    assert validate_source_uri("rtsp://user:pw@10.0.0.5:554/stream1")
    assert validate_source_uri("rtsps://cam.example/live")
    long_ok = "rtsp://h/" + "a" * (limits.SOURCE_URI_MAX_CHARS - len("rtsp://h/"))
    assert validate_source_uri(long_ok)
    for bad in ("http://h/x", "rtsp:///nohost", "rtsp://h/ x", long_ok + "a", "rtsp://h:99999/x", ""):
        with pytest.raises(InvalidDeviceInput) as err:
            validate_source_uri(bad)
        assert "pw" not in str(err.value) and err.value.code == "invalid_source_uri"


LABEL_63 = "c" * 63
NAME_253 = ".".join([LABEL_63] * 3 + ["d" * 61])  # 253 characters


@pytest.mark.parametrize(
    "uri",
    [
        "rtsp://h",
        "rtsp://u:p@h:1/x",
        "rtsp://u:p%40ss:w%3Ard@cam-1.example.:65535/live/ch1?subtype=0&x=a:b/c?d",
        "rtsp://user.name_1~:!&'()*+,;=$x@h/",
        f"rtsp://{LABEL_63}.example/",
        f"rtsp://{NAME_253}/",
        "rtsp://10.0.0.5:554/stream1",
        "rtsp://[::1]:554/x",
        "rtsp://[2001:db8::ffff:1.2.3.4]/x",
        "rtsp://[1:2:3:4:5:6:7:8]/",
        "rtsps://cam/a/%2F/b;c=d",
        "rtsp://h/$Gx/$MTX_QUER",
    ],
)
def test_a_source_uri_mediamtx_accepts_and_can_pull_is_accepted(uri: str) -> None:
    assert validate_source_uri(uri) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "RTSP://h/x",  # MediaMTX matches the scheme in lower case only
        "Rtsp://h/x",
        "rtsp://%zz@h/x",  # Go's url.Parse: a bad escape
        "rtsp://u:%4@h/x",
        "rtsp://h\\/x",  # a backslash in the host
        "rtsp://u@h/x",  # MediaMTX: user and password both, or neither
        "rtsp://u:@h/x",
        "rtsp://:p@h/x",
        "rtsp://u:p@ss@h/x",  # "@" in the password only as %40
        "rtsp://h/x#frag",  # gortsplib refuses fragments when it pulls
        "rtsp://h:0/x",
        "rtsp://h:65536/x",
        "rtsp://h:0554/x",
        "rtsp://h:/x",
        f"rtsp://{'c' * 64}.example/",
        f"rtsp://{NAME_253}x/",
        "rtsp://a..b/",
        "rtsp://[1.2.3.4]/x",  # Go: an IPv4 address is not an IP-literal
        "rtsp://[::1%25eth0]/x",  # no zone
        "rtsp://[::g]/x",
        "rtsp://h:$G1/x",  # placeholders MediaMTX substitutes
        "rtsp://u:$G1@h/x",
        "rtsp://h/x?$MTX_QUERY",
        "rtsp://h/a b",
        "rtsp://h/é",
        "rtsp://h/%zz",
        "rtsp://h/a@b",
        "rtsp:///nohost",
        "http://h/x",
        "",
    ],
)
def test_a_source_uri_mediamtx_refuses_or_cannot_pull_is_refused(uri: str) -> None:
    with pytest.raises(InvalidDeviceInput) as err:
        validate_source_uri(uri)
    assert err.value.code == "invalid_source_uri" and str(err.value) == "invalid_source_uri"


# The source URI pattern with its two rules spelled plainly (domain/source_uri.py spells them for generators):
# an escape as `%` and two hex digits in one piece, the host name's 253 characters as a lookahead of 1 to 253.
PLAINLY_SPELLED_SOURCE_URI = re.compile(
    SOURCE_URI_PATTERN.pattern.replace("%(?=[0-9A-Fa-f]{2})", "%[0-9A-Fa-f][0-9A-Fa-f]").replace(
        r"(?![A-Za-z0-9._\-]{254})", r"(?=[A-Za-z0-9._\-]{1,253}(?![A-Za-z0-9._\-]))"
    )
)


def test_the_source_uri_pattern_accepts_what_its_plain_spelling_accepts() -> None:
    """Where the spellings could differ: a `%` near the end of each component (user, password, path segment,
    query), where a lookahead sees past it, and host names around 253 characters before each delimiter."""
    assert PLAINLY_SPELLED_SOURCE_URI.pattern.count("%[0-9A-Fa-f][0-9A-Fa-f]") == 4
    assert "{1,253}" in PLAINLY_SPELLED_SOURCE_URI.pattern
    rng = random.Random(7)
    pieces = ["%", "4", "a", "G", "z", "$", ":", "/", "%4", "%4a", "%%4a"]
    ends = [
        "rtsp://{}:p@h/",
        "rtsp://u:{}@h/",
        "rtsp://h/{}",
        "rtsp://h/{}/x",
        "rtsp://h/{}?q",
        "rtsp://h?{}",
    ]
    drawn = ("".join(rng.choices(pieces, k=rng.randrange(1, 5))) for _ in range(6000))
    uris = [ends[i % len(ends)].format(text) for i, text in enumerate(drawn)]
    uris += [
        "rtsp://h/%4a",
        "rtsp://h/%4",
        "rtsp://h/%",
        "rtsp://u%4:p@h/",
        "rtsp://u:p%4@h/",
        "rtsp://h/%4/a",
    ]
    names = [".".join([LABEL_63] * 3 + ["d" * n]) + dot for n in range(58, 63) for dot in ("", ".")]
    uris += [f"rtsp://{name}{tail}" for name in names for tail in ("", ":1", "/x", "?q", "/%41")]  # 250-255
    plain = PLAINLY_SPELLED_SOURCE_URI
    differing = [u for u in uris if bool(SOURCE_URI_PATTERN.fullmatch(u)) != bool(plain.fullmatch(u))]
    assert not differing
    accepted = [u for u in uris if SOURCE_URI_PATTERN.fullmatch(u)]
    assert sum("%" in u for u in accepted) > 100 and sum(len(u) > 256 for u in accepted) > 10
    assert SOURCE_URI_PATTERN.fullmatch("rtsp://u%41:p%3a@h/%2F?%20")


def test_batch_and_page_limits() -> None:
    assert validate_batch_size(limits.SET_DESIRED_STATE_BATCH_MAX_ITEMS)
    assert validate_page_size(limits.LIST_PAGE_SIZE_MAX)
    for bad in (0, limits.SET_DESIRED_STATE_BATCH_MAX_ITEMS + 1):
        with pytest.raises(InvalidDeviceInput):
            validate_batch_size(bad)
    for bad in (0, limits.LIST_PAGE_SIZE_MAX + 1):
        with pytest.raises(InvalidDeviceInput):
            validate_page_size(bad)


def test_ensure_adds_missing_replaces_different_and_leaves_equal_alone() -> None:
    desired = PathConfig("rtsp://h/a")
    assert plan_ensure(desired, None) is PathAction.ADD
    assert plan_ensure(desired, PathConfig("rtsp://h/b")) is PathAction.REPLACE
    assert plan_ensure(desired, PathConfig("rtsp://h/a", source_on_demand=False)) is PathAction.REPLACE
    assert plan_ensure(desired, PathConfig("rtsp://h/a")) is PathAction.NONE


def test_path_config_repr_hides_the_source() -> None:
    assert "secret" not in repr(PathConfig("rtsp://u:secret@h/a"))


def test_backoff_doubles_from_one_second_and_caps_at_300() -> None:
    assert [retry_backoff_seconds(n) for n in (1, 2, 3, 9)] == [1.0, 2.0, 4.0, 256.0]
    assert retry_backoff_seconds(10) == limits.RETRY_BACKOFF_CAP_SECONDS
    assert retry_backoff_seconds(10_000) == limits.RETRY_BACKOFF_CAP_SECONDS
    with pytest.raises(ValueError, match="attempts"):
        retry_backoff_seconds(0)
