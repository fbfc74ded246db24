"""Orphans: Sense's events build orphan-scanner's projection; `sense-orphan report` then `apply` deletes
exactly the stale path a disabled device left behind, never a hand-made one; Bell gets the audit."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx

from tests.support.e2e_fixtures import (
    camera_source,
    device_body,
    eventually,
    orphan_apply,
    orphan_report,
    path_names,
    path_source,
)
from tests.support.e2e_flows import SenseFlow
from yovision_platform.tools.environment import LocalEnvironment

IN_USE_DEVICES = 9  # with the stale one: 1 candidate * 100 <= 10+ paths * 10, so the gate allows it
SERVER = "mtx-a"  # the default server of new sites
EXIT_OK = 0


async def bell_orphan_events(admin_db: asyncpg.Connection, env: LocalEnvironment, scan_id: str) -> list[str]:
    schema = env.service("bell-receiver").schema
    rows = await admin_db.fetch(
        f'SELECT event_type FROM "{schema}".audit_events '
        "WHERE source_system = 'orphan' AND payload->>'scan_id' = $1 ORDER BY id",
        scan_id,
    )
    return [r["event_type"] for r in rows]


async def test_report_then_apply_deletes_only_the_stale_path(sense_flow: SenseFlow) -> None:
    env, sense, mediamtx, witness, admin_db = sense_flow
    tenant, site = "tenant-orphan", f"site-{uuid.uuid4().hex[:6]}"
    in_use = []
    for n in range(IN_USE_DEVICES):
        path = f"orph-live-{uuid.uuid4().hex[:8]}"
        body = device_body(tenant, site, path, camera_source(witness, f"10.3.0.{n + 1}"))
        assert (await sense.post("/v1/devices", json=body)).status_code == 201
        in_use.append(path)

    stale = f"orph-stale-{uuid.uuid4().hex[:8]}"
    stale_source = camera_source(witness, "10.3.1.1")
    created = await sense.post("/v1/devices", json=device_body(tenant, site, stale, stale_source))
    device_id = created.json()["id"]
    await eventually(lambda: _configured(mediamtx, [*in_use, stale]), what="all paths configured")
    disabled = await sense.put(f"/v1/devices/{device_id}/desired-state", json={"desired_state": "disabled"})
    assert disabled.status_code == 200
    await eventually(lambda: _absent(mediamtx, stale), what="Sense removed the disabled device's path")
    # Someone re-adds the disabled camera's path by hand: Sense once owned it, no device claims it now.
    added = await mediamtx.post(f"/v3/config/paths/add/{stale}", json={"source": stale_source})
    assert added.status_code == 200, added.status_code
    unowned = f"manual-{uuid.uuid4().hex[:8]}"
    assert (
        await mediamtx.post(f"/v3/config/paths/add/{unowned}", json={"source": "publisher"})
    ).status_code == 200
    await eventually(lambda: _configured(mediamtx, [stale, unowned]), what="hand-made paths listed")

    scan = await eventually(lambda: _report_with_candidates(env, [stale]), what="report sees the stale path")
    assert on_a(unowned) in scan["unowned"] and on_a(unowned) not in scan["candidates"]
    listed = {p["path_name"] for p in scan["candidates"] + scan["unowned"] if p["media_server_id"] == SERVER}
    assert not set(in_use) & listed
    assert scan["gate_preview"] == {"allowed": True, "reason_code": None, "media_server_id": None}

    code, result = await orphan_apply(env, scan)
    assert code == EXIT_OK, result
    outcomes = [(i["media_server_id"], i["path_name"], i["outcome"]) for i in result["items"]]
    assert outcomes == [(SERVER, stale, "deleted")]
    await eventually(lambda: _absent(mediamtx, stale), what="the stale path deleted")
    names = await path_names(mediamtx)
    assert unowned in names, "an unowned path must never be deleted"
    assert set(in_use) <= names

    again, rerun = await orphan_apply(env, scan)
    assert again == EXIT_OK and [i["earlier"] for i in rerun["items"]] == [True]
    events = await eventually(
        lambda: _events(admin_db, env, scan["scan_id"], {"ScanReported", "PathDisposed"}),
        what="audit in Bell",
    )
    assert events.count("PathDisposed") == 1, "one disposition, one audit fact"


async def _configured(mediamtx: httpx.AsyncClient, paths: list[str]) -> bool:
    return set(paths) <= await path_names(mediamtx)


async def _absent(mediamtx: httpx.AsyncClient, path: str) -> bool:
    return await path_source(mediamtx, path) is None


async def _report_with_candidates(env: LocalEnvironment, expected: list[str]) -> dict[str, Any] | None:
    scan = await orphan_report(env)
    return scan if scan["candidates"] == [on_a(name) for name in expected] else None


def on_a(name: str) -> dict[str, str]:
    return {"media_server_id": SERVER, "path_name": name}


async def _events(
    admin_db: asyncpg.Connection, env: LocalEnvironment, scan_id: str, wanted: set[str]
) -> list[str] | None:
    events = await bell_orphan_events(admin_db, env, scan_id)
    return events if wanted <= set(events) else None
