"""Running one check of a claimed watcher: probe, judge, decide, then write everything in one transaction.

The watcher comes as the claim read it (one statement for a batch of claims: no read per check). The
transaction holds the watcher update (fenced by the lease), the check row and any outbox rows
(`WatcherTriggered` = the agent-run request; `WatcherDisabled` = the WATCHER_DISABLED notification). If
the lease was lost or cleared by a user edit meanwhile, nothing is written and nothing is published.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from prometheus_client import CollectorRegistry

from signal_watcher.domain.checking import CheckDecision, WatcherState, decide
from signal_watcher.domain.judging import Judged, JudgeFailed, judge
from signal_watcher.domain.model import WatcherSpec
from signal_watcher.domain.probes import ProbeFailed
from signal_watcher.domain.records import CheckRow, WatcherAfterCheck, WatcherRecord
from signal_watcher.service_layer.metrics import CheckOutcome, SignalMetrics
from signal_watcher.service_layer.ports import ClaimedWatcher, Probe, SignalUnitOfWork, UnitOfWorkFactory
from yovision_platform.errors import LeaseLost
from yovision_platform.messaging import AvroSerde, OutboxMessage, build_event
from yovision_platform.observability import tracer

__all__ = [
    "JUDGE_INTERNAL_ERROR",
    "LEASE_SECONDS",
    "PROBE_INTERNAL_ERROR",
    "CheckRunner",
    "ProbeResult",
    "probe_and_judge",
]

log = logging.getLogger(__name__)
_tracer = tracer(__name__)

NOTIFICATION_KIND_WATCHER_DISABLED = "WATCHER_DISABLED"
PREVIEW_SAMPLE_CHARS = 200
UTF8_MAX_BYTES_PER_CHAR = 4
PROBE_INTERNAL_ERROR = "probe_internal_error"  # an unexpected exception while checking/resolving/connecting
JUDGE_INTERNAL_ERROR = "judge_internal_error"  # an unexpected exception while judging a response
LEASE_SECONDS = 120.0  # a claim's lease: > the probe's 60 s overall deadline plus the write


@dataclass(frozen=True)
class ProbeResult:
    judged: Judged | None
    error_code: str | None
    http_status: int | None
    duration_ms: int | None
    sample: str | None  # the first PREVIEW_SAMPLE_CHARS of the body as text, for the test-now preview only


def _unexpected(code: str, exc: Exception) -> str:
    # Only the class: messages and tracebacks of unexpected errors may quote the URL or a header.
    log.error("probe failed unexpectedly; recorded as a failure", extra={"error_code": type(exc).__name__})
    return code


async def probe_and_judge(probe: Probe, spec: WatcherSpec) -> ProbeResult:
    """Probe the definition's target and judge the response. Never raises (cancellation aside): every
    failure, expected or not, becomes a stable code, so it is recorded and counts towards auto-disable."""
    try:
        response = await probe.probe(spec.method.value, spec.url, spec.headers, spec.body)
    except ProbeFailed as exc:
        return ProbeResult(None, exc.code, None, None, None)
    except Exception as exc:
        return ProbeResult(None, _unexpected(PROBE_INTERNAL_ERROR, exc), None, None, None)
    head = response.body[: PREVIEW_SAMPLE_CHARS * UTF8_MAX_BYTES_PER_CHAR]
    sample = head.decode("utf-8", "replace")[:PREVIEW_SAMPLE_CHARS]
    try:
        judged = judge(spec.compare_mode, spec.json_path, response.status_code, response.body)
    except JudgeFailed as exc:
        return ProbeResult(None, exc.code, response.status_code, response.duration_ms, sample)
    except Exception as exc:
        code = _unexpected(JUDGE_INTERNAL_ERROR, exc)
        return ProbeResult(None, code, response.status_code, response.duration_ms, sample)
    return ProbeResult(judged, None, response.status_code, response.duration_ms, sample)


def _after(decision: CheckDecision, now: datetime) -> WatcherAfterCheck:
    return WatcherAfterCheck(
        checked_at=now,
        status=decision.status,
        consecutive_failures=decision.failures,
        next_check_at=now + timedelta(minutes=decision.next_check_in_minutes),
        last_value_hash=decision.baseline_hash,
        last_value_excerpt=decision.baseline_excerpt,
        changed=decision.changed,
    )


class CheckRunner:
    def __init__(
        self,
        units_of_work: UnitOfWorkFactory,
        probe: Probe,
        serde: AvroSerde,
        *,
        topic_overrides: Mapping[str, str] | None = None,
        metrics: SignalMetrics | None = None,
    ) -> None:
        self._units_of_work = units_of_work
        self._probe = probe
        self._serde = serde
        self._topics = dict(topic_overrides or {})
        self._metrics = metrics if metrics is not None else SignalMetrics.create(CollectorRegistry())

    async def claim_due(self, owner: str, *, limit: int) -> list[ClaimedWatcher]:
        """Claim up to `limit` due ACTIVE watchers for `owner` (`FOR UPDATE SKIP LOCKED` plus a DB-clock
        lease of LEASE_SECONDS), so no other instance claims them until their check is written."""
        async with self._units_of_work() as uow:
            return list(await uow.watchers.claim_due(owner, limit=limit, lease_seconds=LEASE_SECONDS))

    async def run(self, claim: ClaimedWatcher) -> CheckDecision | None:
        """One check of the claimed watcher, as the claim read it; returns the decision written, or None
        when the lease was lost meanwhile (an edit, a pause: nothing written, nothing published). Each check
        is a trace of its own (a "check" span), which the agent-run request it triggers carries on."""
        with _tracer.start_as_current_span(
            "check", attributes={"yovision.watcher_id": str(claim.watcher_id)}
        ) as span:
            decision = await self._check(claim)
            if decision is not None:
                span.set_attribute("yovision.changed", decision.changed)
                if decision.error_code is not None:
                    span.set_attribute("yovision.error_code", decision.error_code)
            return decision

    async def _check(self, claim: ClaimedWatcher) -> CheckDecision | None:
        watcher_id, lease, record = claim.watcher_id, claim.lease, claim.record
        if record.secrets_error is not None:
            # Its headers/body cannot be decrypted (a key missing from the ring, a damaged value): a failure
            # like any other, recorded with its stable code, counted towards auto-disable. Nothing is probed.
            log.warning("watcher secrets unreadable", extra={"error_code": record.secrets_error})
            result = ProbeResult(None, record.secrets_error, None, None, None)
        else:
            result = await probe_and_judge(self._probe, record.spec)
        state = WatcherState(
            record.spec,
            record.status,
            record.consecutive_failures,
            record.last_value_hash,
            record.last_value_excerpt,
        )
        judged_or_error: Judged | str = result.judged if result.judged is not None else str(result.error_code)
        try:
            async with self._units_of_work() as uow:
                decision = decide(state, judged_or_error, triggers_in_last_hour=0)
                if decision.changed:
                    recent = await uow.checks.triggers_in_last_hour(watcher_id)
                    decision = decide(state, judged_or_error, triggers_in_last_hour=recent)
                now = await uow.now()
                await uow.watchers.write_result(watcher_id, lease, _after(decision, now))
                check_id, trigger_id = uuid.uuid4(), uuid.uuid4() if decision.prompt is not None else None
                await uow.checks.insert(
                    CheckRow(
                        id=check_id,
                        watcher_id=watcher_id,
                        checked_at=now,
                        http_status=result.http_status,
                        value_hash=decision.value_hash,
                        changed=decision.changed,
                        trigger_id=trigger_id,
                        error_code=decision.error_code,
                        duration_ms=result.duration_ms,
                        warning=decision.warning,
                    ),
                )
                if decision.prompt is not None and trigger_id is not None:
                    await self._publish_trigger(uow, record, decision, check_id, trigger_id)
                if decision.disabled_now:
                    await self._publish_disabled(uow, record, decision)
        except LeaseLost:
            log.info("check discarded: lease lost", extra={"error_code": "lease_lost"})
            self._metrics.checks.labels(outcome=CheckOutcome.DISCARDED).inc()
            return None
        self._observe(decision, result, had_baseline=record.last_value_hash is not None)
        return decision

    def _observe(self, decision: CheckDecision, result: ProbeResult, *, had_baseline: bool) -> None:
        metrics = self._metrics
        if result.duration_ms is not None:
            metrics.probe_seconds.labels().observe(result.duration_ms / 1000)
        if decision.error_code is not None:
            metrics.checks.labels(outcome=CheckOutcome.FAILED).inc()
            metrics.failure(decision.error_code)
        elif decision.changed:
            metrics.checks.labels(outcome=CheckOutcome.CHANGED).inc()
            metrics.triggers.labels(rate_limited="true" if decision.warning else "false").inc()
        else:
            outcome = CheckOutcome.UNCHANGED if had_baseline else CheckOutcome.BASELINE
            metrics.checks.labels(outcome=outcome).inc()
        if decision.disabled_now:
            metrics.disabled.labels().inc()

    async def _enqueue(
        self, uow: SignalUnitOfWork, event_type: str, watcher_id: str, payload: dict[str, object]
    ) -> None:
        event = build_event(self._serde, event_type, watcher_id, payload)
        await uow.outbox.enqueue(OutboxMessage.from_event(event, topic=self._topics.get(event_type)))

    async def _publish_trigger(
        self,
        uow: SignalUnitOfWork,
        record: WatcherRecord,
        decision: CheckDecision,
        check_id: uuid.UUID,
        trigger_id: uuid.UUID,
    ) -> None:
        await self._enqueue(
            uow,
            "WatcherTriggered",
            str(record.id),
            {
                "watcher_id": str(record.id),
                "trigger_id": str(trigger_id),
                "check_id": str(check_id),
                "user_id": record.user_id,
                "agent_id": record.spec.agent_id,
                "watcher_name": record.spec.name,
                "compare_mode": record.spec.compare_mode.value,
                "rendered_prompt": decision.prompt,
                "warning": decision.warning,
            },
        )

    async def _publish_disabled(
        self, uow: SignalUnitOfWork, record: WatcherRecord, decision: CheckDecision
    ) -> None:
        await self._enqueue(
            uow,
            "WatcherDisabled",
            str(record.id),
            {
                "watcher_id": str(record.id),
                "user_id": record.user_id,
                "watcher_name": record.spec.name,
                "notification_kind": NOTIFICATION_KIND_WATCHER_DISABLED,
                "consecutive_failures": decision.failures,
                "last_error_code": decision.error_code,
            },
        )
