from __future__ import annotations

from dataclasses import replace

import pytest

from signal_watcher.domain.errors import ValidationFailed
from signal_watcher.domain.json_paths import JSON_PATH_MAX_SEGMENTS, validate_json_path
from signal_watcher.domain.model import (
    AUTO_DISABLE_FAILURES,
    BODY_MAX_BYTES,
    INTERVAL_MAX_MINUTES,
    INTERVAL_MIN_MINUTES,
    MAX_HEADERS,
    CompareMode,
    Header,
    Method,
    Status,
    WatcherSpec,
    after_failure,
    backoff_minutes,
    clamp_interval,
    resets_baseline,
    validate_headers,
)

SPEC = WatcherSpec(
    name="price",
    agent_id="agent-1",
    url="https://example.com/api",
    method=Method.POST,
    headers=(Header("Authorization", "Bearer x"),),
    body='{"q": 1}',
    interval_minutes=15,
    compare_mode=CompareMode.JSON_FIELD,
    json_path="data.items.0.price",
    prompt_template="changed: {diff}",
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (-5, 1),
        (0, 1),
        (INTERVAL_MIN_MINUTES, 1),
        (2, 2),
        (1439, 1439),
        (INTERVAL_MAX_MINUTES, 1440),
        (1441, 1440),
    ],
)
def test_interval_is_clamped_to_1_to_1440(given: int, expected: int) -> None:
    assert clamp_interval(given) == expected
    assert replace(SPEC, interval_minutes=given).validated().interval_minutes == expected


def test_twenty_headers_are_accepted_and_twenty_one_refused() -> None:
    headers = [Header(f"X-H{i}", "v") for i in range(MAX_HEADERS)]
    assert len(validate_headers(headers)) == MAX_HEADERS
    with pytest.raises(ValidationFailed) as exc:
        validate_headers([*headers, Header("X-Last", "v")])
    assert exc.value.code == "too_many_headers"


@pytest.mark.parametrize("key", ["", "X:Y", "X\nY", "X\rY", " X"])
def test_bad_header_keys_are_refused(key: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        validate_headers([Header(key, "v")])
    assert exc.value.code == "invalid_header_key"


@pytest.mark.parametrize("key", ["Host", "content-length", "Transfer-Encoding"])
def test_smuggling_headers_are_forbidden(key: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        validate_headers([Header(key, "v")])
    assert exc.value.code == "forbidden_header"


@pytest.mark.parametrize("value", ["a\nb", "a\rb"])
def test_header_values_with_newlines_are_refused(value: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        validate_headers([Header("X-A", value)])
    assert exc.value.code == "invalid_header_value"


def test_json_path_allows_sixteen_segments_not_seventeen() -> None:
    assert len(validate_json_path(".".join(["a"] * JSON_PATH_MAX_SEGMENTS))) == JSON_PATH_MAX_SEGMENTS
    for bad in (".".join(["a"] * (JSON_PATH_MAX_SEGMENTS + 1)), "", "a..b", ".a", "a."):
        with pytest.raises(ValidationFailed):
            validate_json_path(bad)


def test_json_field_mode_requires_a_path_and_other_modes_refuse_one() -> None:
    with pytest.raises(ValidationFailed):
        replace(SPEC, json_path=None).validated()
    with pytest.raises(ValidationFailed) as exc:
        replace(SPEC, compare_mode=CompareMode.HASH).validated()
    assert exc.value.code == "json_path_requires_json_field"
    assert replace(SPEC, compare_mode=CompareMode.HASH, json_path=None).validated().json_path is None


def test_body_is_only_for_post_and_limited_in_size() -> None:
    with pytest.raises(ValidationFailed) as exc:
        replace(SPEC, method=Method.GET).validated()
    assert exc.value.code == "body_requires_post"
    assert replace(SPEC, body="x" * BODY_MAX_BYTES).validated()
    with pytest.raises(ValidationFailed) as exc:
        replace(SPEC, body="x" * (BODY_MAX_BYTES + 1)).validated()
    assert exc.value.code == "body_too_large"


def test_invalid_url_fails_validation() -> None:
    with pytest.raises(ValidationFailed):
        replace(SPEC, url="http://127.0.0.1/").validated()


@pytest.mark.parametrize(
    "change",
    [
        {"url": "https://example.org/api"},
        {"method": Method.GET, "body": None},
        {"headers": ()},
        {"body": "{}"},
        {"compare_mode": CompareMode.HASH, "json_path": None},
        {"json_path": "data.items.1.price"},
    ],
)
def test_editing_probe_or_judging_fields_resets_the_baseline(change: dict[str, object]) -> None:
    assert resets_baseline(SPEC, replace(SPEC, **change))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [{"name": "other"}, {"prompt_template": "x {url}"}, {"interval_minutes": 60}, {"agent_id": "agent-2"}],
)
def test_editing_name_prompt_or_interval_keeps_the_baseline(change: dict[str, object]) -> None:
    assert not resets_baseline(SPEC, replace(SPEC, **change))  # type: ignore[arg-type]


def test_backoff_doubles_per_failure_and_caps_at_32_times() -> None:
    assert [backoff_minutes(10, n) for n in range(0, 8)] == [10, 20, 40, 80, 160, 320, 320, 320]
    assert backoff_minutes(1, 100) == 32


def test_active_watcher_disables_exactly_at_the_fifth_failure() -> None:
    failures, status, disabled = 0, Status.ACTIVE, []
    for _ in range(AUTO_DISABLE_FAILURES + 2):
        outcome = after_failure(status, failures, 5)
        failures, status = outcome.failures, outcome.status
        disabled.append(outcome.disabled_now)
    assert disabled == [False, False, False, False, True, False, False]
    assert status is Status.DISABLED


def test_fourth_failure_does_not_disable() -> None:
    outcome = after_failure(Status.ACTIVE, AUTO_DISABLE_FAILURES - 2, 5)
    assert outcome.failures == 4 and outcome.status is Status.ACTIVE and not outcome.disabled_now
    assert outcome.next_check_in_minutes == 5 * 16


def test_paused_watcher_is_never_disabled_by_failures() -> None:
    outcome = after_failure(Status.PAUSED, AUTO_DISABLE_FAILURES - 1, 5)
    assert outcome.status is Status.PAUSED and not outcome.disabled_now
