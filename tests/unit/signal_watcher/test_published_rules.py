"""The patterns signal-watcher publishes are its validators' rules (JSON Schema semantics, fixed-seed
samples over the characters that matter). A URL the pattern matches is never refused as malformed: at most
the SSRF policy refuses its host (403 `ssrf_*`), which no pattern can state."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from signal_watcher.domain import json_paths, model
from signal_watcher.domain.errors import TargetForbidden, ValidationFailed
from signal_watcher.domain.model import Header
from signal_watcher.domain.ssrf import URL_PATTERN, check_url
from yovision_platform.patterns import json_schema_match

ALPHABET = "aZ09.:-_/?# \t\r\n\x00\x1c\x7fé"


JSON_PATH_ALPHABET = "a0.$[]*?@()'\",: \t\x00\x7f\\é-"


def sample(prefixes: tuple[str, ...], seed: int, count: int = 3000, alphabet: str = ALPHABET) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(prefixes) + "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 10)))
        for _ in range(count)
    ]


def accepts(check: Callable[[str], object], value: str) -> bool:
    """The check's answer, after the platform's text rule (a NUL anywhere is 400 `invalid_text`)."""
    if "\x00" in value:
        return False
    try:
        check(value)
    except ValidationFailed:
        return False
    return True


def header_key(key: str) -> None:
    model.validate_headers([Header(key, "v")])


def header_value(value: str) -> None:
    model.validate_headers([Header("X-Key", value)])


def non_blank(value: str) -> None:
    if not value.strip():  # WatcherSpec.validated
        raise ValidationFailed("invalid_name")


JSON_PATH_EDGES = [
    *("a", "a.b.0", "", ".a", "a.", "a..b", ".".join("a" * 17), ".".join("a" * 16), "a\n"),
    *("$", "$.", "$.a", "$[0]", "$[01]", "$[-1]", "$..a", "$.*", "$['a']", "$.a\n"),
    *("$.$", "$.$.a", "$.$[0]", "$.$a", "$ref", "$a.b"),
    *("$" + ".a" * 16, "$" + ".a" * 17, "$" + "[0]" * 16, "$" + "[0]" * 17),
]

CASES = [
    (
        model.NON_BLANK_PATTERN,
        non_blank,
        ["a", " a ", "", " ", "\t\n", "\x1c", "a\x00", *sample(("", " "), 1)],
    ),
    (
        model.HEADER_KEY_PATTERN,
        header_key,
        [
            "X-A",
            "a b",
            " a",
            "a ",
            "a:b",
            "Host",
            "hOST",
            "Hostx",
            "Content-Length",
            "é",
            *sample(("", "X"), 2),
        ],
    ),
    (model.HEADER_VALUE_PATTERN, header_value, ["v", "", "a\rb", "a\nb", "a\x00", "é", *sample(("",), 3)]),
    (
        json_paths.JSON_PATH_PATTERN,
        json_paths.validate_json_path,
        [
            *JSON_PATH_EDGES,
            *sample(("", "a"), 4),
            *sample(("$", "$.", "$[", "$.a", "$[0]"), 6, 6000, JSON_PATH_ALPHABET),
        ],
    ),
]


@pytest.mark.parametrize(
    ("pattern", "check", "values"), CASES, ids=["non_blank", "key", "value", "json_path"]
)
def test_the_pattern_accepts_exactly_what_the_check_accepts(
    pattern: str, check: Callable[[str], object], values: list[str]
) -> None:
    assert not [v for v in values if json_schema_match(pattern, v) != accepts(check, v)]


def url_syntax_ok(url: str) -> bool:
    try:
        check_url(url)
    except TargetForbidden:
        return True  # well-formed; the SSRF policy's answer
    except ValidationFailed:
        return False
    return True


def test_a_url_the_pattern_matches_is_well_formed() -> None:
    values = [
        "http://example.com/", "HTTPS://A.B.:443/p?q#f", "http://a.b:/", "http://a.b:0/", "http://a.b:65536/",
        "http://u@a.b/", "http://xn--zz.com/", "ftp://a.b", "http://a.b/ x", "http://[::1]/", "http://10.0.0.1/",
        *sample(("http://", "https://a.", "http://a.b:"), 5),
    ]  # fmt: skip
    matched = [v for v in values if json_schema_match(URL_PATTERN, v)]
    assert len(matched) > 100
    assert [v for v in matched if not url_syntax_ok(v)] == []


def test_a_url_the_check_takes_as_well_formed_matches_the_pattern() -> None:
    """The other direction: nothing the API accepts is refused by its published pattern (seed 15 found a
    `*` in a host that httpx parses)."""
    values = [
        "hTtpS://JLPZCNAEYX0.G.EOlXqW7F-YcU0v4*", "http://a*.b/", "http://a.b*/", "http://a.b/*", "http://a!b.c/",
        "http://a.b%2f/", "http://a..b/", "http://.a.b/", "http://a.b:1/", "http://a_b.c-d.e/",
        *sample(("http://", "https://a.", "http://a.b:"), 5),
    ]  # fmt: skip
    well_formed = [v for v in values if url_syntax_ok(v)]
    assert "http://a.b/*" in well_formed and "http://a_b.c-d.e/" in well_formed
    assert [v for v in well_formed if not json_schema_match(URL_PATTERN, v)] == []
