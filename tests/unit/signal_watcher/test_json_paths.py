"""JSON_FIELD paths (`domain.json_paths`): the dotted form and the `$`-rooted JSONPath subset give the same
segments, JSONPath is normalised to the dotted form, every other JSONPath feature is refused with a fixed hint
that never holds the input, and the limits hold at, just under and just over their boundaries."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from signal_watcher.domain.errors import ValidationFailed
from signal_watcher.domain.json_paths import (
    JSON_PATH_HINT,
    JSON_PATH_MAX_CHARS,
    JSON_PATH_MAX_SEGMENTS,
    canonical_json_path,
    validate_json_path,
)
from signal_watcher.domain.model import CompareMode, Method, WatcherSpec

SPEC = WatcherSpec(
    "w", "a", "https://example.com/", Method.GET, (), None, 15, CompareMode.JSON_FIELD, "a", "{diff}"
)


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("$.item.price", "item.price"),
        ("$.a.b[0].c", "a.b.0.c"),
        ("$.items[2]", "items.2"),
        ("$[0].x", "0.x"),
        ("$[0]", "0"),
        ("$[10][0]", "10.0"),
        ("$.a", "a"),
        ("$.0", "0"),  # a dot name may be digits: the dotted form reads it as an index or a key
        ("$.$ref.x", "$ref.x"),  # `$` inside a name is a character, not the root
        ("$.prix-€", "prix-€"),
        ("data.items.0.price", "data.items.0.price"),  # the dotted form as it was
        ("a[0].b", "a[0].b"),  # dotted: `a[0]` is a key, as before
        ("$ref.x", "$ref.x"),  # dotted: not `$.` or `$[`
        ("with space.x", "with space.x"),
    ],
)
def test_accepted_paths_are_stored_in_the_dotted_form(written: str, canonical: str) -> None:
    assert canonical_json_path(written) == canonical
    assert validate_json_path(written) == validate_json_path(canonical) == tuple(canonical.split("."))
    assert canonical_json_path(canonical) == canonical  # the stored form reads back as itself


REFUSED = [
    "$",  # the whole document
    "$.",
    "$..price",  # recursive descent
    "$.a..b",
    "$.*",  # wildcards
    "$.a.*",
    "$[*]",
    "$.a[*].b",
    "$[?(@.price > 10)]",  # filters
    "$.a[?(@.x)]",
    "$[0:2]",  # slices
    "$[:1]",
    "$[-1]",  # negative index
    "$[0,1]",  # unions
    "$['a']",  # quoted names
    '$["a"]',
    "$['a.b']",
    "$.a['b']",
    "$[01]",  # a leading zero
    "$[ 0]",
    "$[]",
    "$[0",
    "$.a]",
    "$.a b",  # a space in a dot name
    "$.a(b)",
    "$.length()",
    "$.@",
    "$.a:b",
    "$.a,b",
    "$.a\\b",
    "$.a\tb",
    "$.$",  # a first key `$` would read as the root
    "$.$.a",
    "$.$[0]",
    "",
    "a..b",
    ".a",
    "a.",
]


@pytest.mark.parametrize("path", REFUSED)
def test_other_jsonpath_features_are_refused_with_the_fixed_hint(path: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        validate_json_path(path)
    assert (refused.value.status, refused.value.code, refused.value.detail) == (
        422,
        "invalid_json_path",
        JSON_PATH_HINT,
    )
    with pytest.raises(ValidationFailed):
        replace(SPEC, json_path=path).validated()


def test_the_hint_shows_the_accepted_forms_and_never_the_input() -> None:
    for form in ("data.items.0.price", "$.data.items[0].price", "$[0].x", "16"):
        assert form in JSON_PATH_HINT
    for path in ("$..secret_path", "$['tok3n']"):
        with pytest.raises(ValidationFailed) as refused:
            validate_json_path(path)
        assert path not in str(refused.value) and "secret_path" not in str(refused.value.detail)


@pytest.mark.parametrize(
    ("segments", "accepted"),
    [(JSON_PATH_MAX_SEGMENTS - 1, True), (JSON_PATH_MAX_SEGMENTS, True), (JSON_PATH_MAX_SEGMENTS + 1, False)],
)
def test_the_segment_limit_applies_to_the_normalised_path(segments: int, accepted: bool) -> None:
    dotted = ".".join(["a"] * segments)
    names = "$" + ".a" * segments
    indexes = "$" + "[0]" * segments
    mixed = "$.a" + "[0]" * (segments - 1)
    for path in (dotted, names, indexes, mixed):
        if accepted:
            assert len(validate_json_path(path)) == segments, path
        else:
            with pytest.raises(ValidationFailed):
                validate_json_path(path)


@pytest.mark.parametrize(
    ("length", "accepted"),
    [(JSON_PATH_MAX_CHARS - 1, True), (JSON_PATH_MAX_CHARS, True), (JSON_PATH_MAX_CHARS + 1, False)],
)
def test_the_length_limit_applies_to_the_path_as_written(length: int, accepted: bool) -> None:
    for path in ("x" * length, "$." + "x" * (length - 2)):
        assert len(path) == length
        if accepted:
            validate_json_path(path)
        else:
            with pytest.raises(ValidationFailed):
                validate_json_path(path)


def test_validation_stores_the_dotted_form_and_an_equal_path_keeps_the_baseline() -> None:
    validated = replace(SPEC, json_path="$.data.items[0].price").validated()
    assert validated.json_path == "data.items.0.price"
    assert replace(SPEC, json_path="data.items.0.price").validated() == validated


def test_normalising_is_idempotent_and_keeps_the_segments_on_random_paths() -> None:
    rng = random.Random(22)
    alphabet = "ab0$.[]*'é-"
    accepted = 0
    for _ in range(5000):
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randrange(8)))
        path = rng.choice(["$", "$.", "$[", ""]) + tail
        try:
            segments = validate_json_path(path)
        except ValidationFailed:
            continue
        accepted += 1
        canonical = canonical_json_path(path)
        assert validate_json_path(canonical) == segments and canonical_json_path(canonical) == canonical, path
    assert accepted > 500
