"""What Sense accepts, the real MediaMTX accepts: source URIs and path names, by property-based tests.

Sense forwards a device's `source_uri` and `path_name` to MediaMTX as a path configuration. A value Sense
accepts that MediaMTX refuses would be stored, then fail at every reconcile. So:

- every value generated from Sense's own published pattern (the OpenAPI's, `PUBLISHED_SOURCE_URI` and
  `PUBLISHED_PATH_NAME`) is accepted by the real MediaMTX as a path's configuration;
- for near misses (URI-shaped strings over an alphabet of the characters that matter: other schemes and
  cases, bad escapes, backslashes, brackets, `@`, `#`, `$G1`, spaces, non-ASCII), every value the real
  MediaMTX refuses, Sense refuses (`validate_*` raises `InvalidDeviceInput`, which the API answers 422
  `invalid_<field>`).

Each example is one `POST /v3/config/paths/replace/<name>` to a private MediaMTX of this module (the real
program built by the set-up), so no other test or running stack sees its paths. The examples are fixed by
the Hypothesis profile (`tests/support/stack.py`: derandomized in `make test`, a fresh seed and more examples
in `make fuzz`).
"""

from __future__ import annotations

import string
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sense_reconciler.domain import model
from sense_reconciler.domain.errors import InvalidDeviceInput
from sense_reconciler.domain.limits import SOURCE_URI_MAX_CHARS
from sense_reconciler.domain.reconcile import PathConfig
from sense_reconciler.domain.source_uri import PUBLISHED_SOURCE_URI
from tests.support.stack import MEDIAMTX_BIN
from yovision_platform.patterns import json_schema_match
from yovision_platform.tools.mediamtx_sandbox import MediaMtxSandbox, mediamtx_sandbox

PROBE_PATH = "acceptance/probe"
VALID_SOURCE = "rtsp://u:p@127.0.0.1:1/acceptance"


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MediaMtxSandbox]:
    work_dir: Path = tmp_path_factory.mktemp("mediamtx-acceptance")
    async with mediamtx_sandbox(MEDIAMTX_BIN, work_dir, label="acceptance") as server:
        yield server


@pytest.fixture(scope="module")
def mediamtx(sandbox: MediaMtxSandbox) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sandbox.url, auth=sandbox.auth(), timeout=10.0) as client:
        yield client


def mediamtx_accepts(client: httpx.Client, name: str, source: str) -> bool:
    """Whether MediaMTX takes `source` as the configuration of path `name` (Sense's config: on demand)."""
    body = PathConfig(source).to_mediamtx()
    response = client.post(f"/v3/config/paths/replace/{name}", json=body)
    if response.status_code == 200:
        return True
    assert response.status_code == 400, response.status_code  # a refusal, never anything else
    return False


def sense_accepts(validator: object, value: str) -> bool:
    assert callable(validator)
    try:
        validator(value)
    except InvalidDeviceInput:
        return False
    return True


def _text(alphabet: str, max_size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, max_size=max_size)


NEAR_MISS_CHARACTERS = string.ascii_letters[:6] + "GZz019%:@/?#[]\\ $'\"<>{}|^`~!&()*+,;=._-é\x7f"
near_miss_uris = st.builds(
    lambda scheme, userinfo, host, port, path, tail: scheme + userinfo + host + port + path + tail,
    st.sampled_from(["rtsp://", "rtsps://", "RTSP://", "Rtsp://", "rtsp+http://", "rtsp:/", "http://"]),
    st.one_of(
        st.just(""),
        _text(NEAR_MISS_CHARACTERS, 6).map(lambda u: u + "@"),
        st.builds(lambda u, p: f"{u}:{p}@", _text(NEAR_MISS_CHARACTERS, 5), _text(NEAR_MISS_CHARACTERS, 5)),
    ),
    st.one_of(
        st.sampled_from(["h", "cam-1.example", "10.0.0.5", "[::1]", "[1.2.3.4]", "a..b", ""]),
        _text(NEAR_MISS_CHARACTERS, 8),
        _text("0123456789abcdefg:.%25", 12).map(lambda v: f"[{v}]"),
    ),
    st.one_of(st.just(""), _text("0123456789$G", 6).map(lambda p: ":" + p)),
    st.one_of(st.just(""), _text(NEAR_MISS_CHARACTERS, 10).map(lambda p: "/" + p)),
    st.one_of(
        st.just(""),
        _text(NEAR_MISS_CHARACTERS, 6).map(lambda q: "?" + q),
        _text(NEAR_MISS_CHARACTERS, 4).map(lambda f: "#" + f),
    ),
)


@given(st.from_regex(PUBLISHED_SOURCE_URI, fullmatch=True).filter(lambda u: len(u) <= SOURCE_URI_MAX_CHARS))
def test_every_source_uri_sense_publishes_is_accepted_by_mediamtx(mediamtx: httpx.Client, uri: str) -> None:
    assert sense_accepts(model.validate_source_uri, uri)
    assert mediamtx_accepts(mediamtx, PROBE_PATH, uri)


@pytest.mark.parametrize("uri", ["rtsp://%zz@h/x", "RTSP://H/x", "rtsp://h\\/x"])
def test_the_uris_found_from_outside_are_refused_by_both(mediamtx: httpx.Client, uri: str) -> None:
    """Each answered 201 once, then failed at every reconcile with `mediamtx_http_400`."""
    assert not mediamtx_accepts(mediamtx, PROBE_PATH, uri)
    assert not sense_accepts(model.validate_source_uri, uri)


@given(near_miss_uris)
@example("rtsp://%zz@h/x")
@example("RTSP://H/x")
@example("rtsp://h\\/x")
@example("rtsp://u@h/x")
def test_every_source_uri_mediamtx_refuses_sense_refuses(mediamtx: httpx.Client, uri: str) -> None:
    if not mediamtx_accepts(mediamtx, PROBE_PATH, uri):
        assert not sense_accepts(model.validate_source_uri, uri)


# Drawn segment by segment, then kept when the published pattern matches: drawn from the whole pattern,
# most draws fail its lookaheads (`.`/`..` segments, length) and Hypothesis gives up.
published_path_names = (
    st.lists(st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True), min_size=1, max_size=8)
    .map("/".join)
    .filter(lambda name: json_schema_match(model.PUBLISHED_PATH_NAME, name))
)


@given(published_path_names)
def test_every_path_name_sense_publishes_is_accepted_by_mediamtx(mediamtx: httpx.Client, name: str) -> None:
    assert sense_accepts(model.validate_path_name, name)
    assert mediamtx_accepts(mediamtx, name, VALID_SOURCE)
    assert mediamtx.delete(f"/v3/config/paths/delete/{name}").status_code == 200


@given(_text(string.ascii_letters[:3] + "019_.-/~ %@é", 12))
@example("a//b")
@example("a/../b")
@example("~a")
def test_every_path_name_mediamtx_refuses_sense_refuses(mediamtx: httpx.Client, name: str) -> None:
    if not sense_accepts(model.validate_path_name, name):
        return
    assert mediamtx_accepts(mediamtx, name, VALID_SOURCE)
    assert mediamtx.delete(f"/v3/config/paths/delete/{name}").status_code == 200
