"""The patterns the Control API publishes are the validators' rules: what one accepts, the other does.

Each published pattern is searched (JSON Schema semantics, as a client or a fuzzer reads it) against the
validator on edge cases and on a fixed-seed sample of strings over an alphabet of the characters that
matter. The source URI pattern is narrower on purpose (docs/decisions.md): it leaves out IPv6 literals
and non-ASCII hosts, which the validator accepts, so every URI it matches is accepted, and the two agree
on everything else.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from sense_reconciler.domain import model
from sense_reconciler.domain.errors import InvalidInput
from yovision_platform.patterns import json_schema_match

ALPHABET = "aZ09._-/:@?#[]% \t\n\x00\x1c\x7f\x85é\u2028"
SAMPLES = 4000


def accepts(validator: Callable[[str], object], value: str) -> bool:
    try:
        validator(value)
    except InvalidInput:
        return False
    return True


def published(pattern: str, value: str) -> bool:
    return json_schema_match(pattern, value)


def sample(prefixes: tuple[str, ...], seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        rng.choice(prefixes) + "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 12)))
        for _ in range(SAMPLES)
    ]


CASES: list[tuple[str, Callable[[str], object], list[str]]] = [
    (
        model.PUBLISHED_ID,
        lambda v: model.validate_id(v, "tenant_id"),
        ["a", "A.b-c_d", "", ".a", "a" * 64, "a" * 65, "a\n", "é", *sample(("", "a"), 1)],
    ),
    (
        model.PUBLISHED_ACTOR,
        model.validate_actor,
        ["ops", "a:b@c", "", "a b", "a" * 128, "a" * 129, "ops\n", *sample(("", "o"), 2)],
    ),
    (
        model.PUBLISHED_NAME,
        model.validate_name,
        ["cam", " cam\t", "", " ", "c\tm", "ca\x7fm", "\x1ccam", "é", "cam\n", *sample(("", " ", "c"), 3)],
    ),
    (
        model.PUBLISHED_PATH_NAME,
        model.validate_path_name,
        [
            "a/b",
            "all",
            "all_others",
            "allx",
            "a//b",
            "./a",
            "a/..",
            "a" * 255,
            "a" * 256,
            "a\n",
            *sample(("", "a"), 4),
        ],
    ),
]


@pytest.mark.parametrize(("pattern", "validator", "values"), CASES, ids=["id", "actor", "name", "path_name"])
def test_the_pattern_accepts_exactly_what_the_validator_accepts(
    pattern: str, validator: Callable[[str], object], values: list[str]
) -> None:
    differing = [v for v in values if published(pattern, v) != accepts(validator, v)]
    assert not differing


def test_the_source_uri_pattern_is_the_validator_narrowed_to_ascii_hosts() -> None:
    values = [
        "rtsp://cam/s", "RTSPS://u:p@h:554/x?y#z", "rtsp://h:", "rtsp://h:0", "rtsp://h:65535", "rtsp://h:65536",
        "rtsp://h:00080/", "rtsp://", "rtsp://u@", "rtsp://h/ x", "http://h/", "rtsp://h/é", "rtsp://u@@h/",
        "rtsp://h/\x85", "rtsp://h\n", "rtsp://[::1]/", "rtsp://hé/",
        *sample(("rtsp://", "rtsps://u:p@", "rtsp://h:"), 5),
    ]  # fmt: skip
    for value in values:
        if published(model.PUBLISHED_SOURCE_URI, value):
            assert accepts(model.validate_source_uri, value), value
        elif value.isascii() and "[" not in value and "]" not in value:
            assert not accepts(model.validate_source_uri, value), value
