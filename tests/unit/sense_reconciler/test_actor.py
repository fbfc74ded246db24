"""The audit actor is the access token's subject, unchanged: every subject the platform's verifier accepts
is an actor Sense records and an actor the audit push contract to Bell (and so Bell) takes, and nothing else
is.

Checked on the boundaries and on a fixed-seed sample over an alphabet of the characters that matter, as
each rule reads it: the verifier's `SUBJECT_PATTERN`, Sense's `validate_actor`, and the audit push contract's
`actor` schema (JSON Schema semantics, with its `maxLength`)."""

from __future__ import annotations

import random

import pytest

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import InvalidDeviceInput
from sense_reconciler.domain.model import validate_actor
from yovision_platform.audit_push import _facts as facts
from yovision_platform.patterns import json_schema_match
from yovision_platform.web import SUBJECT_PATTERN

ALPHABET = "aZ09._:@-/|+ #\\\t\n\x00é"
SAMPLES = 4000
SUBJECT_MAX_CHARS = 128
EDGES = [
    "",
    "a",
    "alice",
    "bench",
    "operator-cli",
    "user@example.org",
    "auth0:5f7c8ec7c33c6c004bbafe82",
    "f3a7c2d0-1b4e-4c1a-9f6e-2d8b7a5c4e10",
    ".-_:@",
    "a" * SUBJECT_MAX_CHARS,
    "a" * (SUBJECT_MAX_CHARS + 1),
    "a b",
    "a|b",
    "alice\n",
    "é",
]


def verifier_accepts(subject: str) -> bool:
    return SUBJECT_PATTERN.fullmatch(subject) is not None


def sense_records(subject: str) -> bool:
    try:
        validate_actor(subject)
    except InvalidDeviceInput:
        return False
    return True


def push_takes(subject: str) -> bool:
    return facts.MAX_ACTOR_CHARS >= len(subject) >= 1 and json_schema_match(facts.ACTOR_PATTERN, subject)


def sample(seed: int) -> list[str]:
    rng = random.Random(seed)
    lengths = (0, 1, 2, 5, 12, SUBJECT_MAX_CHARS - 1, SUBJECT_MAX_CHARS, SUBJECT_MAX_CHARS + 1)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.choice(lengths))) for _ in range(SAMPLES)]


def test_the_limits_are_the_subjects() -> None:
    assert limits.ACTOR_MAX_CHARS == facts.MAX_ACTOR_CHARS == SUBJECT_MAX_CHARS


@pytest.mark.parametrize("values", [EDGES, sample(23)], ids=["edges", "sample"])
def test_sense_and_bell_take_exactly_the_subjects_the_verifier_accepts(values: list[str]) -> None:
    differing = [v for v in values if len({verifier_accepts(v), sense_records(v), push_takes(v)}) > 1]
    assert not differing
    assert any(sense_records(v) for v in values) and not all(sense_records(v) for v in values)
