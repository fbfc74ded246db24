"""What one check does to a watcher: the pure decision after a probe, before anything is written.

Success: failures reset, next check after `interval`; the first judged value only records the baseline; a
different value is a change (render the prompt, trigger, maybe warn TRIGGER_RATE_LIMITED). Failure (probe
or judging): the baseline stays, failures + 1, backoff, and ACTIVE -> DISABLED at the fifth failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from signal_watcher.domain.judging import (
    TRIGGER_RATE_LIMITED,
    Judged,
    build_diff,
    is_trigger_rate_limited,
    render_prompt,
)
from signal_watcher.domain.model import Status, WatcherSpec, after_failure

__all__ = ["CheckDecision", "WatcherState", "decide"]


@dataclass(frozen=True)
class WatcherState:
    spec: WatcherSpec
    status: Status
    consecutive_failures: int
    last_value_hash: str | None
    last_value_excerpt: str | None


@dataclass(frozen=True)
class CheckDecision:
    changed: bool
    value_hash: str | None
    error_code: str | None
    warning: str | None
    prompt: str | None  # set exactly when a run must be triggered
    failures: int
    status: Status
    next_check_in_minutes: int
    baseline_hash: str | None
    baseline_excerpt: str | None
    disabled_now: bool


def decide(state: WatcherState, result: Judged | str, *, triggers_in_last_hour: int) -> CheckDecision:
    """`result` is the judged value, or the stable error code of a failed probe/judging."""
    spec = state.spec
    if isinstance(result, str):
        outcome = after_failure(state.status, state.consecutive_failures, spec.interval_minutes)
        return CheckDecision(
            changed=False,
            value_hash=None,
            error_code=result,
            warning=None,
            prompt=None,
            failures=outcome.failures,
            status=outcome.status,
            next_check_in_minutes=outcome.next_check_in_minutes,
            baseline_hash=state.last_value_hash,
            baseline_excerpt=state.last_value_excerpt,
            disabled_now=outcome.disabled_now,
        )
    changed = state.last_value_hash is not None and state.last_value_hash != result.value_hash
    prompt = warning = None
    if changed:
        diff = build_diff(spec.compare_mode, spec.json_path, state.last_value_excerpt or "", result.excerpt)
        prompt = render_prompt(spec.prompt_template, url=spec.url, name=spec.name, diff=diff)
        warning = TRIGGER_RATE_LIMITED if is_trigger_rate_limited(triggers_in_last_hour) else None
    return CheckDecision(
        changed=changed,
        value_hash=result.value_hash,
        error_code=None,
        warning=warning,
        prompt=prompt,
        failures=0,
        status=state.status,
        next_check_in_minutes=spec.interval_minutes,
        baseline_hash=result.value_hash,
        baseline_excerpt=result.excerpt,
        disabled_now=False,
    )
