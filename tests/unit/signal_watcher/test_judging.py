from __future__ import annotations

import hashlib
import json

import pytest

from signal_watcher.domain.judging import (
    DIFF_SIDE_MAX_CHARS,
    PROMPT_MAX_CHARS,
    TRIGGER_RATE_LIMIT_PER_HOUR,
    JudgeFailed,
    build_diff,
    extract_json_path,
    is_trigger_rate_limited,
    judge,
    render_prompt,
)
from signal_watcher.domain.masking import MASK, body_length, mask_headers
from signal_watcher.domain.model import CompareMode, Header

DOC = {"data": {"items": [{"price": 10}, {"price": 12, "name": "b"}], "flag": False, "empty": None}}


def test_hash_mode_is_sha256_of_the_body_bytes() -> None:
    body = b"\x00\xffhello"
    assert judge(CompareMode.HASH, None, 200, body).value_hash == hashlib.sha256(body).hexdigest()


def test_status_code_mode_judges_the_code_regardless_of_body() -> None:
    a = judge(CompareMode.STATUS_CODE, None, 200, b"a")
    assert a == judge(CompareMode.STATUS_CODE, None, 200, b"b")
    assert a != judge(CompareMode.STATUS_CODE, None, 503, b"a")
    assert a.excerpt == "200"


def test_json_field_follows_dotted_path_with_array_indexes() -> None:
    body = json.dumps(DOC).encode()
    assert judge(CompareMode.JSON_FIELD, "data.items.1.price", 200, body).excerpt == "12"
    assert judge(CompareMode.JSON_FIELD, "data.items.1.name", 200, body).excerpt == "b"
    assert judge(CompareMode.JSON_FIELD, "data.flag", 200, body).excerpt == "false"
    assert extract_json_path(DOC, "data.items.0") == {"price": 10}


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("data.items.2.price", "json_path_missing"),
        ("data.items.-1.price", "json_path_missing"),
        ("data.nope", "json_path_missing"),
        ("data.items.x", "json_path_missing"),
        ("data.flag.x", "json_path_missing"),
        ("data.empty", "json_value_null"),
    ],
)
def test_json_field_missing_or_null_is_a_failure(path: str, code: str) -> None:
    with pytest.raises(JudgeFailed) as exc:
        judge(CompareMode.JSON_FIELD, path, 200, json.dumps(DOC).encode())
    assert exc.value.code == code


def test_json_field_reads_a_jsonpath_stored_before_normalisation() -> None:
    """Before 0.3.0 `$.data.items[1].price` was stored as written (and never found); it is judged as the
    JSONPath it is now, and a stored path that is no longer valid selects nothing."""
    body = json.dumps(DOC).encode()
    assert judge(CompareMode.JSON_FIELD, "$.data.items[1].price", 200, body).excerpt == "12"
    assert judge(CompareMode.JSON_FIELD, "$.data.items[1].price", 200, body) == judge(
        CompareMode.JSON_FIELD, "data.items.1.price", 200, body
    )
    for invalid in ("$.data.items[*].price", "$..price"):
        with pytest.raises(JudgeFailed) as exc:
            judge(CompareMode.JSON_FIELD, invalid, 200, body)
        assert exc.value.code == "json_path_missing"


def test_json_field_parse_error_is_a_failure() -> None:
    with pytest.raises(JudgeFailed) as exc:
        judge(CompareMode.JSON_FIELD, "a", 200, b"<html>")
    assert exc.value.code == "json_parse_error"


def test_diff_truncates_each_side_to_500_chars() -> None:
    old, new = "o" * (DIFF_SIDE_MAX_CHARS + 1), "n" * DIFF_SIDE_MAX_CHARS
    diff = build_diff(CompareMode.HASH, None, old, new)
    assert "o" * DIFF_SIDE_MAX_CHARS in diff and "o" * (DIFF_SIDE_MAX_CHARS + 1) not in diff
    assert "n" * DIFF_SIDE_MAX_CHARS in diff
    assert build_diff(CompareMode.STATUS_CODE, None, "200", "503") == "[HTTP status] 200 -> 503"
    assert build_diff(CompareMode.JSON_FIELD, "a.b", "1", "2") == "[field a.b] old: 1 -> new: 2"


def test_prompt_rendering_keeps_dollar_and_braces_literal() -> None:
    rendered = render_prompt(
        "$1 \\1 {name} {other} {url} {diff} ${diff}", url="https://x.test/{name}", name="$0", diff="d"
    )
    assert rendered == "$1 \\1 $0 {other} https://x.test/{name} d $d"


def test_prompt_is_capped() -> None:
    assert (
        len(render_prompt("{diff}", url="", name="", diff="x" * (PROMPT_MAX_CHARS + 5))) == PROMPT_MAX_CHARS
    )


def test_fifth_trigger_within_an_hour_is_rate_limited() -> None:
    assert not is_trigger_rate_limited(TRIGGER_RATE_LIMIT_PER_HOUR - 1)
    assert is_trigger_rate_limited(TRIGGER_RATE_LIMIT_PER_HOUR)
    assert is_trigger_rate_limited(TRIGGER_RATE_LIMIT_PER_HOUR + 1)


@pytest.mark.parametrize(
    "key",
    ["Authorization", "Cookie", "X-API-Key", "X-Auth-Token", "client_secret", "X-Password", "set-cookie"],
)
def test_sensitive_header_values_are_masked(key: str) -> None:
    assert mask_headers([Header(key, "s3cret")]) == [Header(key, MASK)]


def test_other_headers_and_body_length_are_shown() -> None:
    assert mask_headers([Header("Accept", "json")]) == [Header("Accept", "json")]
    assert body_length("héllo") == 6
    assert body_length(None) is None
