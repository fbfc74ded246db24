"""The patterns the Control API publishes are the validators' rules: what one accepts, the other does.

Each published pattern is searched (JSON Schema semantics, as a client or a fuzzer reads it) against the
validator on edge cases and on a fixed-seed sample of strings over an alphabet of the characters that
matter. (What MediaMTX makes of the source URIs the pattern accepts is proven against the real MediaMTX by
tests/ports/sense_reconciler/test_source_uri_acceptance.py.)
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from sense_reconciler.domain import limits, model
from sense_reconciler.domain.errors import InvalidDeviceInput
from sense_reconciler.domain.source_uri import PUBLISHED_SOURCE_URI
from yovision_platform.patterns import json_schema_match

ALPHABET = "aZ09._-/:@?#[]%$G \\\t\n\x00\x1c\x7f\x85é\u2028"
SAMPLES = 4000


def accepts(validator: Callable[[str], object], value: str) -> bool:
    try:
        validator(value)
    except InvalidDeviceInput:
        return False
    return True


# The `maxLength` the schema publishes beside a pattern that leaves the length out.
MAX_LENGTHS = {
    model.PUBLISHED_PATH_NAME: limits.PATH_NAME_MAX_CHARS,
    PUBLISHED_SOURCE_URI: limits.SOURCE_URI_MAX_CHARS,
}


def published(pattern: str, value: str) -> bool:
    return len(value) <= MAX_LENGTHS.get(pattern, len(value)) and json_schema_match(pattern, value)


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
    (
        PUBLISHED_SOURCE_URI,
        model.validate_source_uri,
        [
            "rtsp://cam/s",
            "rtsps://u:p@h:554/x?y",
            "rtsp://h/x#z",
            "RTSP://h/x",
            "rtsp://%zz@h/x",
            "rtsp://h\\/x",
            "rtsp://u@h/x",
            "rtsp://:p@h/x",
            "rtsp://u:@h/x",
            "rtsp://h:",
            "rtsp://h:0",
            "rtsp://h:65535",
            "rtsp://h:65536",
            "rtsp://h:00080/",
            "rtsp://",
            "rtsp://h/ x",
            "rtsp://h/é",
            "rtsp://u:p@@h/",
            "rtsp://h/\x85",
            "rtsp://h\n",
            "rtsp://[::1]/",
            "rtsp://[::1%25eth0]/",
            "rtsp://[1.2.3.4]/",
            "rtsp://hé/",
            "rtsp://h/$G1",
            "rtsp://h/$MTX_QUERY",
            "rtsp://u:pa$$@h/",
            "rtsp://h/%4",
            "rtsp://h/a@b",
            "rtsp://" + "a" * 63 + ".b/",
            "rtsp://" + "a" * 64 + ".b/",
            *sample(("rtsp://", "rtsps://u:p@", "rtsp://h:", "rtsp://h/"), 5),
        ],
    ),
]


@pytest.mark.parametrize(
    ("pattern", "validator", "values"), CASES, ids=["id", "name", "path_name", "source_uri"]
)
def test_the_pattern_accepts_exactly_what_the_validator_accepts(
    pattern: str, validator: Callable[[str], object], values: list[str]
) -> None:
    differing = [v for v in values if published(pattern, v) != accepts(validator, v)]
    assert not differing
