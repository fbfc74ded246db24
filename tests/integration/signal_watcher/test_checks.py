from __future__ import annotations

import asyncpg
from prometheus_client import CollectorRegistry, generate_latest

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.repository import WatcherRepository
from signal_watcher.domain.model import AUTO_DISABLE_FAILURES, CompareMode, Header, Method, Status
from signal_watcher.metrics import SignalMetrics
from signal_watcher.service_layer.checks import CheckRunner
from tests.integration.signal_watcher.conftest import FIXTURE_HOST, check_now, make_spec, outbox_events
from tests.integration.signal_watcher.fixture_server import FixtureServer
from yovision_platform.avro import AvroSerde


async def _create(pool: asyncpg.Pool, repo: WatcherRepository, url: str, **changes: object):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await repo.insert(conn, "user-1", make_spec(url, **changes))


async def _checks(pool: asyncpg.Pool, repo: WatcherRepository, watcher_id):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        return await repo.list_checks(conn, watcher_id, limit=100, offset=0)


async def _get(pool: asyncpg.Pool, repo: WatcherRepository, watcher_id):  # type: ignore[no-untyped-def]
    async with pool.acquire() as conn:
        record = await repo.get(conn, "user-1", watcher_id)
    assert record is not None
    return record


async def test_hash_mode_baseline_then_no_change_then_one_trigger(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    runner: CheckRunner,
    serde: AvroSerde,
) -> None:
    fixture_server.state["text"] = "v1"
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    first = await check_now(pool, repo, runner, watcher.id)
    assert first is not None and not first.changed and first.prompt is None
    second = await check_now(pool, repo, runner, watcher.id)
    assert second is not None and not second.changed
    assert await outbox_events(pool, repo.schema, serde) == []
    fixture_server.state["text"] = "v2"
    third = await check_now(pool, repo, runner, watcher.id)
    assert third is not None and third.changed
    events = await outbox_events(pool, repo.schema, serde)
    assert [(t, e) for t, e, _ in events] == [("signal.trigger.v1", "WatcherTriggered")]
    payload = events[0][2]
    assert payload["watcher_id"] == str(watcher.id) and payload["user_id"] == "user-1"
    assert payload["agent_id"] == "agent-1" and payload["warning"] is None
    assert payload["rendered_prompt"].startswith(
        "watch changed: [response body, first 500 chars]\nold:\nv1\n---\nnew:\nv2"
    )
    checks = await _checks(pool, repo, watcher.id)
    assert [c.changed for c in checks] == [True, False, False]
    assert str(checks[0].trigger_id) == payload["trigger_id"] and str(checks[0].id) == payload["check_id"]
    record = await _get(pool, repo, watcher.id)
    assert record.last_changed_at is not None and record.consecutive_failures == 0


async def test_json_field_mode_triggers_with_old_and_new_field_values(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    runner: CheckRunner,
    serde: AvroSerde,
) -> None:
    fixture_server.state["json"] = {"data": {"items": [{"price": 10}], "noise": 1}}
    watcher = await _create(
        pool,
        repo,
        fixture_server.url(FIXTURE_HOST, "/json"),
        compare_mode=CompareMode.JSON_FIELD,
        json_path="data.items.0.price",
    )
    await check_now(pool, repo, runner, watcher.id)
    fixture_server.state["json"] = {"data": {"items": [{"price": 10}], "noise": 2}}
    assert not (await check_now(pool, repo, runner, watcher.id)).changed  # type: ignore[union-attr]
    fixture_server.state["json"] = {"data": {"items": [{"price": 12}], "noise": 2}}
    assert (await check_now(pool, repo, runner, watcher.id)).changed  # type: ignore[union-attr]
    [(_, _, payload)] = await outbox_events(pool, repo.schema, serde)
    assert payload["rendered_prompt"] == "watch changed: [field data.items.0.price] old: 10 -> new: 12"
    fixture_server.state["json"] = {"data": {"items": []}}
    failed = await check_now(pool, repo, runner, watcher.id)
    assert failed is not None and failed.error_code == "json_path_missing" and failed.failures == 1


async def test_status_code_mode_triggers_on_a_new_code_only(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    runner: CheckRunner,
    serde: AvroSerde,
) -> None:
    watcher = await _create(
        pool, repo, fixture_server.url(FIXTURE_HOST, "/text"), compare_mode=CompareMode.STATUS_CODE
    )
    fixture_server.state.update(status=200, text="a")
    await check_now(pool, repo, runner, watcher.id)
    fixture_server.state.update(text="b")
    assert not (await check_now(pool, repo, runner, watcher.id)).changed  # type: ignore[union-attr]
    fixture_server.state.update(status=503)
    assert (await check_now(pool, repo, runner, watcher.id)).changed  # type: ignore[union-attr]
    [(_, _, payload)] = await outbox_events(pool, repo.schema, serde)
    assert payload["rendered_prompt"] == "watch changed: [HTTP status] 200 -> 503"


async def test_probe_or_judging_edits_reset_the_baseline_and_other_edits_do_not(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    runner: CheckRunner,
    serde: AvroSerde,
) -> None:
    fixture_server.state["text"] = "v1"
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    await check_now(pool, repo, runner, watcher.id)
    async with pool.acquire() as conn:
        kept = await repo.update_spec(
            conn,
            "user-1",
            watcher.id,
            make_spec(watcher.spec.url, name="renamed", interval_minutes=99),
            reset_baseline=False,
        )
    assert kept is not None and kept.last_value_hash is not None and kept.spec.name == "renamed"
    async with pool.acquire() as conn:
        reset = await repo.update_spec(
            conn,
            "user-1",
            watcher.id,
            make_spec(watcher.spec.url, headers=(Header("X-A", "1"),)),
            reset_baseline=True,
        )
    assert reset is not None and reset.last_value_hash is None and reset.last_changed_at is None
    fixture_server.state["text"] = "v2"
    rebuilt = await check_now(pool, repo, runner, watcher.id)
    assert rebuilt is not None and not rebuilt.changed  # a new baseline, not a change
    assert await outbox_events(pool, repo.schema, serde) == []


async def test_failures_back_off_then_disable_once_with_one_notification(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    runner: CheckRunner,
    serde: AvroSerde,
) -> None:
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/redirect"), interval_minutes=3)
    backoffs = []
    for _ in range(AUTO_DISABLE_FAILURES):
        decision = await check_now(pool, repo, runner, watcher.id)
        assert decision is not None and decision.error_code == "redirect"
        record = await _get(pool, repo, watcher.id)
        assert record.last_checked_at is not None
        backoffs.append(round((record.next_check_at - record.last_checked_at).total_seconds() / 60))
    assert backoffs == [6, 12, 24, 48, 96]
    record = await _get(pool, repo, watcher.id)
    assert record.status is Status.DISABLED and record.consecutive_failures == AUTO_DISABLE_FAILURES
    events = await outbox_events(pool, repo.schema, serde)
    assert [(t, e) for t, e, _ in events] == [("signal.notification.v1", "WatcherDisabled")]
    assert events[0][2]["consecutive_failures"] == 5 and events[0][2]["last_error_code"] == "redirect"
    assert events[0][2]["notification_kind"] == "WATCHER_DISABLED"
    async with pool.acquire() as conn:  # a disabled watcher is never claimed again
        assert await repo.claim_due(conn, "x", limit=10, lease_seconds=60) == []
        enabled = await repo.set_status(conn, "user-1", watcher.id, Status.ACTIVE)
    assert enabled is not None and enabled.consecutive_failures == 0 and enabled.last_value_hash is None
    assert enabled.status is Status.ACTIVE


async def test_success_resets_failures(
    fixture_server: FixtureServer, pool: asyncpg.Pool, repo: WatcherRepository, runner: CheckRunner
) -> None:
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/status/404"))
    fixture_server_url_bad = fixture_server.url(FIXTURE_HOST, "/redirect")
    async with pool.acquire() as conn:
        await repo.update_spec(
            conn, "user-1", watcher.id, make_spec(fixture_server_url_bad), reset_baseline=True
        )
    await check_now(pool, repo, runner, watcher.id)
    await check_now(pool, repo, runner, watcher.id)
    assert (await _get(pool, repo, watcher.id)).consecutive_failures == 2
    async with pool.acquire() as conn:
        await repo.update_spec(conn, "user-1", watcher.id, make_spec(watcher.spec.url), reset_baseline=True)
    ok = await check_now(pool, repo, runner, watcher.id)
    assert ok is not None and ok.error_code is None
    record = await _get(pool, repo, watcher.id)
    assert record.consecutive_failures == 0 and record.last_checked_at is not None
    assert round((record.next_check_at - record.last_checked_at).total_seconds() / 60) == 10


async def test_pausing_during_a_probe_discards_its_result(
    fixture_server: FixtureServer, pool: asyncpg.Pool, repo: WatcherRepository, runner: CheckRunner
) -> None:
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/redirect"))
    for _ in range(AUTO_DISABLE_FAILURES - 1):
        await check_now(pool, repo, runner, watcher.id)
    async with pool.acquire() as conn:
        [claimed] = await repo.claim_due(conn, "x", limit=10, lease_seconds=60) or [None]
        await conn.execute(f"UPDATE {repo.schema.quoted}.watchers SET next_check_at = now()")
        [claimed] = await repo.claim_due(conn, "x", limit=10, lease_seconds=60)
        await repo.set_status(conn, "user-1", watcher.id, Status.PAUSED)
    assert await runner.run(watcher.id, claimed.lease) is None
    record = await _get(pool, repo, watcher.id)
    assert record.status is Status.PAUSED and record.consecutive_failures == AUTO_DISABLE_FAILURES - 1


async def test_fifth_trigger_within_an_hour_is_marked_rate_limited(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    runner: CheckRunner,
    serde: AvroSerde,
) -> None:
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    for i in range(6):
        fixture_server.state["text"] = f"v{i}"
        await check_now(pool, repo, runner, watcher.id)
    warnings = [payload["warning"] for _, _, payload in await outbox_events(pool, repo.schema, serde)]
    assert warnings == [None, None, None, None, "TRIGGER_RATE_LIMITED"]
    checks = await _checks(pool, repo, watcher.id)
    assert checks[0].warning == "TRIGGER_RATE_LIMITED" and checks[0].error_code is None


async def test_headers_and_body_are_sent_and_stored_encrypted(
    fixture_server: FixtureServer, pool: asyncpg.Pool, repo: WatcherRepository, runner: CheckRunner
) -> None:
    watcher = await _create(
        pool,
        repo,
        fixture_server.url(FIXTURE_HOST, "/echo"),
        method=Method.POST,
        headers=(Header("Authorization", "Bearer sekret-token-123"),),
        body="body-sekret-456",
        compare_mode=CompareMode.STATUS_CODE,  # /echo reflects the secrets; keep them out of the excerpt
    )
    await check_now(pool, repo, runner, watcher.id)
    async with pool.acquire() as conn:
        raw = await conn.fetchrow(f"SELECT * FROM {repo.schema.quoted}.watchers")
        checks = await conn.fetch(f"SELECT * FROM {repo.schema.quoted}.checks")
    dump = repr(dict(raw)) + repr([dict(c) for c in checks])
    for secret in ("sekret-token-123", "body-sekret-456", "Authorization"):
        assert secret not in dump
        assert secret.encode() not in raw["headers_ciphertext"] + raw["body_ciphertext"]
    assert raw["body_length"] == len("body-sekret-456")
    assert (await _get(pool, repo, watcher.id)).spec.headers == (
        Header("Authorization", "Bearer sekret-token-123"),
    )


async def test_metrics_count_outcomes_with_fixed_labels_only(
    fixture_server: FixtureServer,
    pool: asyncpg.Pool,
    repo: WatcherRepository,
    local_probe: ProbeClient,
    serde: AvroSerde,
) -> None:
    registry = CollectorRegistry()
    runner = CheckRunner(pool, repo, local_probe, serde, metrics=SignalMetrics.create(registry))
    fixture_server.state["text"] = "a"
    watcher = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/text"))
    broken = await _create(pool, repo, fixture_server.url(FIXTURE_HOST, "/redirect"))
    await check_now(pool, repo, runner, watcher.id)
    fixture_server.state["text"] = "b"
    await check_now(pool, repo, runner, watcher.id)
    await check_now(pool, repo, runner, broken.id)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("signal_checks_total", outcome="baseline") == 1
    assert value("signal_checks_total", outcome="changed") == 1
    assert value("signal_checks_total", outcome="failed") == 1
    assert value("signal_check_failures_total", code="redirect") == 1
    assert value("signal_triggers_total", rate_limited="false") == 1
    rendered = b"".join(generate_latest(registry).splitlines())
    assert FIXTURE_HOST.encode() not in rendered and b"user-1" not in rendered
