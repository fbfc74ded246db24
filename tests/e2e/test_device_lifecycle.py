"""Device lifecycle across Sense, MediaMTX, Bell (HTTP relay and Kafka) and orphan-scanner's projection."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from tests.support.e2e_fixtures import (
    SENSE_OPERATOR,
    camera_source,
    device_body,
    eventually,
    path_source,
)
from tests.support.e2e_flows import SenseFlow
from yovision_platform.tools.environment import LocalEnvironment


async def converged(sense: httpx.AsyncClient, device_id: str, generation: int | None = None) -> bool:
    status = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
    done = status["status"] == "converged" and status["observed_generation"] == status["desired_generation"]
    return done and (generation is None or status["desired_generation"] >= generation)


async def audit_rows(
    admin_db: asyncpg.Connection, env: LocalEnvironment, device_id: str
) -> list[asyncpg.Record]:
    schema = env.service("bell-receiver").schema
    return await admin_db.fetch(
        f'SELECT event_id, action, source_system, actor FROM "{schema}".audit_events '
        "WHERE device_id = $1 ORDER BY occurred_at, id",
        device_id,
    )


async def test_three_devices_created_enabled_converge_and_reach_bell_once_each(sense_flow: SenseFlow) -> None:
    """The reproduction of the new user's first steps: three devices, each enabled, then zero dead letters
    (checked by the doctor after the test) and each audit fact in Bell exactly once."""
    env, sense, mediamtx, witness, admin_db = sense_flow
    tenant, site = "tenant-first", f"site-{uuid.uuid4().hex[:6]}"
    created = []
    for n in range(3):
        path = f"first-{uuid.uuid4().hex[:8]}-{n}"
        source = camera_source(witness, f"10.1.0.{n + 1}")
        response = await sense.post("/v1/devices", json=device_body(tenant, site, path, source))
        assert response.status_code == 201, response.text
        created.append((response.json()["id"], path, source))
    for device_id, path, source in created:
        await eventually(lambda p=path, s=source: _has_source(mediamtx, p, s), what=f"path {path} configured")
        await eventually(lambda d=device_id: converged(sense, d), what="reconcile status converged")
    for device_id, _, _ in created:
        rows = await eventually(
            lambda d=device_id: _audit_count(admin_db, env, d, 1), what="audit fact in Bell"
        )
        assert [r["action"] for r in rows] == ["device.created"]


async def _has_source(mediamtx: httpx.AsyncClient, path: str, source: str) -> bool:
    return await path_source(mediamtx, path) == source


async def _audit_count(
    admin_db: asyncpg.Connection, env: LocalEnvironment, device_id: str, expected: int
) -> list[asyncpg.Record] | None:
    rows = await audit_rows(admin_db, env, device_id)
    assert len(rows) <= expected, "an audit fact is stored more than once"
    return rows if len(rows) == expected else None


async def test_a_device_lives_through_create_change_disable_and_enable(sense_flow: SenseFlow) -> None:
    env, sense, mediamtx, witness, admin_db = sense_flow
    tenant, site = "tenant-life", f"site-{uuid.uuid4().hex[:6]}"
    neighbour_path = f"life-neighbour-{uuid.uuid4().hex[:8]}"
    neighbour_source = camera_source(witness, "10.2.0.9")
    assert (
        await sense.post("/v1/devices", json=device_body(tenant, site, neighbour_path, neighbour_source))
    ).status_code == 201

    path = f"life-{uuid.uuid4().hex[:8]}"
    first = camera_source(witness, "10.2.0.1")
    response = await sense.post("/v1/devices", json=device_body(tenant, site, path, first))
    assert response.status_code == 201, response.text
    device_id = response.json()["id"]
    assert first not in response.text
    await eventually(lambda: _has_source(mediamtx, path, first), what="path created with its source")

    second = camera_source(witness, "10.2.0.2")
    changed = await sense.patch(f"/v1/devices/{device_id}", json={"source_uri": second})
    assert changed.status_code == 200, changed.text
    await eventually(lambda: _has_source(mediamtx, path, second), what="path replaced with the new source")

    disabled = await sense.put(f"/v1/devices/{device_id}/desired-state", json={"desired_state": "disabled"})
    assert disabled.status_code == 200, disabled.text
    await eventually(lambda: _gone(mediamtx, path), what="exactly that path deleted")
    assert await path_source(mediamtx, neighbour_path) == neighbour_source, "a neighbour's path was touched"
    await eventually(lambda: converged(sense, device_id), what="disabled device converged")

    enabled = await sense.put(f"/v1/devices/{device_id}/desired-state", json={"desired_state": "enabled"})
    assert enabled.status_code == 200, enabled.text
    await eventually(lambda: _has_source(mediamtx, path, second), what="path back after re-enabling")
    await eventually(lambda: converged(sense, device_id), what="re-enabled device converged")

    expected = [
        "device.created",
        "device.config_changed",
        "device.desired_state_changed",
        "device.desired_state_changed",
    ]
    rows = await eventually(
        lambda: _audit_count(admin_db, env, device_id, 4), what="four audit facts in Bell"
    )
    assert [r["action"] for r in rows] == expected
    assert {r["source_system"] for r in rows} == {"sense"}
    assert {r["actor"] for r in rows} == {SENSE_OPERATOR}, "the actor is the token's subject"
    await eventually(
        lambda: _both_channels_arrived(admin_db, env, [r["event_id"] for r in rows]), what="Kafka copies"
    )
    await eventually(
        lambda: _projected(admin_db, env, device_id, path), what="orphan projection has the ownership"
    )


async def _gone(mediamtx: httpx.AsyncClient, path: str) -> bool:
    return await path_source(mediamtx, path) is None


async def _both_channels_arrived(
    admin_db: asyncpg.Connection, env: LocalEnvironment, event_ids: list[uuid.UUID]
) -> bool:
    """Each fact came over the signed HTTP relay (Sense's push cursor passed it) and its DeviceAuditRecorded
    copy from Kafka (Bell's consumer processed it, as a duplicate of the stored fact: no dead letter)."""
    sense_schema = env.service("sense-reconciler").schema
    bell_schema = env.service("bell-receiver").schema
    delivered = await admin_db.fetchval(
        f"""SELECT count(*) FROM "{sense_schema}".device_operation_outbox o, "{sense_schema}".outbox_cursors c
             WHERE c.outbox = 'device_operation_outbox' AND o.event_id = ANY($1)
               AND (pg_visible_in_snapshot(o.xid, c.prev_snapshot)
                    OR (pg_visible_in_snapshot(o.xid, c.cur_snapshot) AND o.id <= c.last_id))""",
        event_ids,
    )
    consumed = await admin_db.fetchval(
        f'SELECT count(*) FROM "{bell_schema}".processed_events '
        "WHERE source_system = 'sense' AND event_id = ANY($1)",
        event_ids,
    )
    return bool(delivered == consumed == len(event_ids))


async def _projected(admin_db: asyncpg.Connection, env: LocalEnvironment, device_id: str, path: str) -> bool:
    schema = env.service("orphan-scanner").schema
    claim = await admin_db.fetchrow(
        f'SELECT path_name, desired_state FROM "{schema}".device_claims WHERE device_id = $1',
        uuid.UUID(device_id),
    )
    owned = await admin_db.fetchval(
        f'SELECT count(*) FROM "{schema}".path_ownership WHERE device_id = $1 AND path_name = $2',
        uuid.UUID(device_id),
        path,
    )
    return claim is not None and tuple(claim) == (path, "enabled") and owned == 1
