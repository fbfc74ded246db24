"""Operator input of `sense-orphan apply`: actor, scan id, confirmation; and the confirmation text."""

from __future__ import annotations

import uuid

import pytest

from orphan_scanner.domain import limits
from orphan_scanner.domain.inputs import (
    InvalidScanInput,
    confirmation_text,
    parse_scan_id,
    validate_actor,
    validate_confirmation,
)

SCAN_ID = uuid.UUID("3f2b9c4e-8a1d-4e5f-9b7c-0d1e2f3a4b5c")


def test_actor_limit_is_128() -> None:
    assert limits.ACTOR_MAX_CHARS == 128


@pytest.mark.parametrize(
    "actor",
    [
        "a",
        "alice",
        "A1",
        "9",
        "ops.alice_b:team@example-org",
        "a" * 127,
        "a" * 128,
        "x._:@-",
    ],
)
def test_valid_actors(actor: str) -> None:
    assert validate_actor(actor) == actor


@pytest.mark.parametrize(
    "actor",
    [
        "",
        "a" * 129,
        "a" * 300,
        "alice smith",
        " alice",
        "alice ",
        "alice\n",
        "\talice",
        "ålice",
        "alicé",
        "\u0430lice",  # Cyrillic a
        "\u0661\u0662\u0663",  # Arabic-Indic digits
        "-alice",
        ".alice",
        "_alice",
        ":alice",
        "@alice",
        "alice/bob",
        "alice;rm",
        "alice'",
        'alice"',
        "alice#1",
    ],
)
def test_invalid_actors_are_refused_with_a_stable_code(actor: str) -> None:
    with pytest.raises(InvalidScanInput) as caught:
        validate_actor(actor)
    assert caught.value.code == "invalid_actor"
    assert caught.value.field == "actor"
    if actor.strip():
        assert actor.strip() not in str(caught.value)


def test_canonical_scan_id_is_parsed() -> None:
    assert parse_scan_id(str(SCAN_ID)) == SCAN_ID
    nil = "00000000-0000-0000-0000-000000000000"
    assert parse_scan_id(nil) == uuid.UUID(nil)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not-a-uuid",
        str(SCAN_ID).upper(),
        "3F2b9c4e-8a1d-4e5f-9b7c-0d1e2f3a4b5c",
        "{" + str(SCAN_ID) + "}",
        SCAN_ID.hex,
        "urn:uuid:" + str(SCAN_ID),
        " " + str(SCAN_ID),
        str(SCAN_ID) + " ",
        str(SCAN_ID) + "\n",
        str(SCAN_ID)[:-1],
        str(SCAN_ID) + "0",
        "3f2b9c4e8a1d-4e5f-9b7c-0d1e2f3a4b5c",
    ],
)
def test_non_canonical_scan_ids_are_refused(text: str) -> None:
    with pytest.raises(InvalidScanInput) as caught:
        parse_scan_id(text)
    assert caught.value.code == "invalid_scan_id"
    assert caught.value.__cause__ is None


def test_confirmation_limit_is_256() -> None:
    assert limits.CONFIRMATION_MAX_CHARS == 256


@pytest.mark.parametrize("text", ["x", "delete 1 owned_stale path of scan x", "a" * 255, "a" * 256])
def test_valid_confirmations(text: str) -> None:
    assert validate_confirmation(text) == text


@pytest.mark.parametrize(
    "text", ["", "a" * 257, "a" * 1000, "delete\n1", "tab\there", "nul\x00", "bell\x07", "\x7f"]
)
def test_invalid_confirmations_are_refused(text: str) -> None:
    with pytest.raises(InvalidScanInput) as caught:
        validate_confirmation(text)
    assert caught.value.code == "invalid_confirmation"


def test_confirmation_text_exact_format() -> None:
    assert confirmation_text(SCAN_ID, 1) == f"delete 1 owned_stale path of scan {SCAN_ID}"
    assert confirmation_text(SCAN_ID, 2) == f"delete 2 owned_stale paths of scan {SCAN_ID}"
    assert confirmation_text(SCAN_ID, 0) == f"delete 0 owned_stale paths of scan {SCAN_ID}"
    assert confirmation_text(SCAN_ID, 128) == f"delete 128 owned_stale paths of scan {SCAN_ID}"


def test_confirmation_text_is_a_valid_confirmation_for_every_allowed_count() -> None:
    for count in range(limits.APPLY_MAX_CANDIDATES + 1):
        text = confirmation_text(SCAN_ID, count)
        assert validate_confirmation(text) == text
        assert str(SCAN_ID) in text
