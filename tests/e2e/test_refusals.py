"""A configuration MediaMTX refuses: failed once with MediaMTX's redacted reason, counted and reported, never
retried by itself; a change with a configuration MediaMTX takes converges it.

Since Sense refuses at its API every source URI MediaMTX would refuse, the refusal here comes from the
server's own configuration: an operator sets a path default (`sourceRedirect`) that no camera path can
satisfy, on `mtx-c`, the refusal flow's own server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.e2e_fixtures import (
    Witness,
    camera_source,
    device_body,
    eventually,
    mediamtx_client,
    path_source,
)
from yovision_platform.tools.doctor import examine
from yovision_platform.tools.environment import LocalEnvironment

SERVER = "mtx-c"
REFUSING_DEFAULTS = {"sourceRedirect": "rtsp://127.0.0.1:1/elsewhere"}  # useless unless source is redirect


@pytest.fixture
async def mtx_c(env: LocalEnvironment) -> AsyncIterator[httpx.AsyncClient]:
    async with mediamtx_client(env, SERVER) as http:
        yield http


async def refused_status(sense: httpx.AsyncClient, device_id: str) -> dict[str, Any] | None:
    status: dict[str, Any] = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
    return status if status["status"] == "failed" and status["next_attempt_at"] is None else None


async def refused_gauge_is(env: LocalEnvironment, expected: float) -> bool:
    async with httpx.AsyncClient(timeout=10.0) as http:
        page = (await http.get(f"{env.url('sense-reconciler')}/metrics")).text
    line = f'sense_reconcile_refused{{media_server="{SERVER}"}} '
    [value] = [row.removeprefix(line) for row in page.splitlines() if row.startswith(line)]
    return float(value) == expected


async def test_a_refused_configuration_waits_for_a_change_and_a_valid_change_converges_it(
    env: LocalEnvironment, sense: httpx.AsyncClient, mtx_c: httpx.AsyncClient, witness: Witness
) -> None:
    tenant, site = "tenant-refusal", f"site-{uuid.uuid4().hex[:6]}"
    path = f"{site}/cam-1"
    placed = await sense.put(f"/v1/sites/{tenant}/{site}", json={"media_server_id": SERVER})
    assert placed.status_code == 200, placed.text
    assert (await mtx_c.patch("/v3/config/pathdefaults/patch", json=REFUSING_DEFAULTS)).status_code == 200
    try:
        source = camera_source(witness, "127.0.0.1")
        created = await sense.post("/v1/devices", json=device_body(tenant, site, path, source))
        assert created.status_code == 201, created.text
        device_id = created.json()["id"]

        status = await eventually(lambda: refused_status(sense, device_id), what="the device refused")
        assert (status["last_error_code"], status["attempts"]) == ("mediamtx_http_400", 1)
        reason = status["last_error_reason"]
        assert "sourceRedirect" in reason and "useless" in reason
        await eventually(lambda: refused_gauge_is(env, 1.0), what="the refused gauge of mtx-c")
        report = await examine(env.root, checks=["refused_configs"])
        [finding] = report.findings
        assert (finding.check, finding.count) == ("refused_configs", 1) and SERVER in finding.detail
        assert await path_source(mtx_c, path) is None
    finally:
        fixed = await mtx_c.patch("/v3/config/pathdefaults/patch", json={"sourceRedirect": ""})
        assert fixed.status_code == 200

    assert await refused_status(sense, device_id), "fixing the server alone retries nothing"
    new_source = camera_source(witness, "127.0.0.1")
    changed = await sense.patch(f"/v1/devices/{device_id}", json={"source_uri": new_source})
    assert changed.status_code == 200, changed.text

    async def converged() -> bool:
        status = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
        return bool(status["status"] == "converged") and await path_source(mtx_c, path) == new_source

    await eventually(converged, what="the changed device converged on mtx-c")
    status = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
    assert (status["last_error_code"], status["last_error_reason"]) == (None, None)
    await eventually(lambda: refused_gauge_is(env, 0.0), what="the refused gauge back at 0")
    assert (await examine(env.root, checks=["refused_configs"])).healthy
