from __future__ import annotations

from dataclasses import replace

from signal_watcher.domain.checking import WatcherState, decide
from signal_watcher.domain.judging import TRIGGER_RATE_LIMITED, Judged
from signal_watcher.domain.model import CompareMode, Method, Status, WatcherSpec

SPEC = WatcherSpec(
    name="n$1",
    agent_id="a",
    url="https://example.com/",
    method=Method.GET,
    headers=(),
    body=None,
    interval_minutes=10,
    compare_mode=CompareMode.STATUS_CODE,
    json_path=None,
    prompt_template="{name}: {diff} at {url}",
)
FRESH = WatcherState(SPEC, Status.ACTIVE, 0, None, None)


def test_first_success_only_records_the_baseline() -> None:
    decision = decide(FRESH, Judged("h200", "200"), triggers_in_last_hour=0)
    assert not decision.changed and decision.prompt is None
    assert decision.baseline_hash == "h200" and decision.baseline_excerpt == "200"


def test_same_value_is_no_change_and_resets_failures() -> None:
    state = replace(FRESH, last_value_hash="h200", last_value_excerpt="200", consecutive_failures=3)
    decision = decide(state, Judged("h200", "200"), triggers_in_last_hour=0)
    assert not decision.changed and decision.prompt is None
    assert decision.failures == 0 and decision.next_check_in_minutes == 10


def test_changed_value_renders_the_prompt_with_the_diff() -> None:
    state = replace(FRESH, last_value_hash="h200", last_value_excerpt="200")
    decision = decide(state, Judged("h503", "503"), triggers_in_last_hour=3)
    assert decision.changed and decision.warning is None
    assert decision.prompt == "n$1: [HTTP status] 200 -> 503 at https://example.com/"
    assert decision.baseline_hash == "h503"


def test_fifth_trigger_in_an_hour_still_triggers_with_a_warning() -> None:
    state = replace(FRESH, last_value_hash="h200", last_value_excerpt="200")
    decision = decide(state, Judged("h503", "503"), triggers_in_last_hour=4)
    assert decision.prompt is not None and decision.warning == TRIGGER_RATE_LIMITED
    assert decision.error_code is None and decision.failures == 0


def test_failure_keeps_the_baseline_and_backs_off() -> None:
    state = replace(FRESH, last_value_hash="h200", last_value_excerpt="200", consecutive_failures=1)
    decision = decide(state, "timeout", triggers_in_last_hour=0)
    assert decision.error_code == "timeout" and decision.failures == 2
    assert decision.next_check_in_minutes == 40 and decision.baseline_hash == "h200"
    assert decision.prompt is None and not decision.disabled_now


def test_fifth_failure_disables_an_active_watcher_once() -> None:
    decision = decide(replace(FRESH, consecutive_failures=4), "dns", triggers_in_last_hour=0)
    assert decision.disabled_now and decision.status is Status.DISABLED
    again = decide(
        replace(FRESH, status=Status.DISABLED, consecutive_failures=5), "dns", triggers_in_last_hour=0
    )
    assert not again.disabled_now
