"""Rotating the keys of secrets at rest, as the runbook (docs/runbooks/rotating-keys.md) says: add a new key
and make it active, restart, run `rotate-keys` while the service serves, then drop the old key. Sense's
camera URIs and signal-watcher's watcher headers keep working throughout and end under the new key only."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.support.e2e_fixtures import (
    Witness,
    camera_source,
    client,
    device_body,
    eventually,
    path_source,
    run_cli,
    user_token,
    venv_bin,
)
from tests.support.e2e_flows import SenseFlow
from yovision_platform.tools.environment import LocalEnvironment
from yovision_platform.tools.localhost import write_private_file

EXIT_OK = 0
NEW_KEY_ID = "k2"


def new_key(env: LocalEnvironment, service: str) -> Path:
    return write_private_file(
        env.root / "secrets" / f"{service}-{NEW_KEY_ID}.key", secrets.token_hex(32) + "\n"
    )


async def restart(env: LocalEnvironment, service: str) -> None:
    await env.stop(service)
    await env.start(service)


async def rotate(env: LocalEnvironment, service: str) -> dict[str, Any]:
    code, out, err = await run_cli(env, service, venv_bin(service), "rotate-keys", "--batch-rows", "2")
    assert code == EXIT_OK, err
    report: dict[str, Any] = json.loads(out)
    assert report["active_key_id"] == NEW_KEY_ID and report["unreadable"] == {}
    return report


def ring(env: LocalEnvironment, service: str, prefix: str) -> dict[str, str]:
    keys: dict[str, str] = json.loads(env.env_of(service).get(f"{prefix}SECRETS_KEY_FILES", "{}"))
    return keys


async def test_sense_source_uris_rotate_to_a_new_key_while_serving(sense_flow: SenseFlow) -> None:
    env, sense, mediamtx, witness, admin_db = sense_flow
    tenant, site = "tenant-rotate", f"site-{uuid.uuid4().hex[:6]}"
    devices = []
    for n in range(5):
        path, source = f"{site}/cam-{n}", camera_source(witness, f"10.8.0.{n + 1}")
        created = await sense.post("/v1/devices", json=device_body(tenant, site, path, source))
        assert created.status_code == 201
        devices.append((created.json()["id"], path, source))
    await eventually(lambda: _sources(mediamtx, devices), what="paths configured")

    keys = ring(env, "sense-reconciler", "SENSE_")
    keys[NEW_KEY_ID] = str(new_key(env, "sense"))
    env.set_setting("sense-reconciler", "SENSE_SECRETS_KEY_FILES", json.dumps(keys))
    env.set_setting("sense-reconciler", "SENSE_SECRETS_ACTIVE_KEY_ID", NEW_KEY_ID)
    await restart(env, "sense-reconciler")
    # while the rotation runs, an operator changes one camera's URI through the API
    device_id, path, _ = devices[0]
    changed = camera_source(witness, "10.8.9.9")
    rotation = asyncio.create_task(rotate(env, "sense-reconciler"))
    patched = await sense.patch(f"/v1/devices/{device_id}", json={"source_uri": changed})
    assert patched.status_code == 200
    await rotation
    devices[0] = (device_id, path, changed)
    await eventually(lambda: _sources(mediamtx, devices), what="the changed URI configured")
    schema = env.service("sense-reconciler").schema
    old_key_rows = await admin_db.fetchval(
        f'SELECT count(*) FROM "{schema}".devices '
        "WHERE source_uri IS NOT NULL OR substring(source_uri_ciphertext from 1 for 6) <> $1",
        b"YV\x01\x02" + NEW_KEY_ID.encode(),
    )
    assert old_key_rows == 0, "every source URI is under the new key"

    # the old key goes: every URI still decrypts (each device is disabled and enabled again, and its path
    # configured again from the decrypted URI)
    env.set_setting("sense-reconciler", "SENSE_SECRETS_KEY_FILES", json.dumps({NEW_KEY_ID: keys[NEW_KEY_ID]}))
    await restart(env, "sense-reconciler")
    wanted = {}
    for device_id, _, _ in devices:
        for state in ("disabled", "enabled"):
            response = await sense.put(
                f"/v1/devices/{device_id}/desired-state", json={"desired_state": state}
            )
            assert response.status_code == 200
        status = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
        wanted[device_id] = status["desired_generation"]
    await eventually(lambda: _converged(sense, wanted), what="every device converged with the new key only")
    assert await _sources(mediamtx, devices)


async def test_signal_watcher_secrets_rotate_off_the_pre_ring_key(
    env: LocalEnvironment, witness: Witness
) -> None:
    user = f"e2e-rotate-{uuid.uuid4().hex[:6]}"
    token = await user_token(env, "signal-watcher", user)
    header_secret = f"Bearer rot-{secrets.token_hex(12)}"
    witness.secrets |= {token, header_secret}
    async with client(env.url("signal-watcher"), witness, {"Authorization": f"Bearer {token}"}) as signal:
        created = await signal.post(
            "/v1/signal-watchers",
            json={
                "name": "rotating",
                "agent_id": "agent-e2e",
                "url": "http://127.0.0.1:9/status",
                "method": "POST",
                "headers": [{"key": "Authorization", "value": header_secret}],
                "body": "token=abc",
                "interval_minutes": 60,
                "compare_mode": "STATUS_CODE",
                "prompt_template": "{name}: {diff}",
            },
        )
        assert created.status_code == 201, created.text
        watcher_id = created.json()["id"]
        # the key of SIGNAL_SECRETS_AES_KEY_FILE (id "legacy") stays for reading; k2 becomes active
        env.set_setting(
            "signal-watcher",
            "SIGNAL_SECRETS_KEY_FILES",
            json.dumps({NEW_KEY_ID: str(new_key(env, "signal"))}),
        )
        env.set_setting("signal-watcher", "SIGNAL_SECRETS_ACTIVE_KEY_ID", NEW_KEY_ID)
        await restart(env, "signal-watcher")
        report = await rotate(env, "signal-watcher")
        assert report["rotated"] >= 1
        env.set_setting("signal-watcher", "SIGNAL_SECRETS_AES_KEY_FILE", None)
        await restart(env, "signal-watcher")
        shown = await signal.get(f"/v1/signal-watchers/{watcher_id}")
        assert shown.status_code == 200, shown.text
        headers = shown.json()["headers"]
        assert [h["key"] for h in headers] == ["Authorization"] and header_secret not in shown.text


async def _converged(sense: httpx.AsyncClient, generations: dict[str, int]) -> bool:
    for device_id, generation in generations.items():
        status = (await sense.get(f"/v1/devices/{device_id}/reconcile-status")).json()
        assert status["last_error_code"] not in {"secret_key_unknown", "secret_unreadable"}, status
        if (status["status"], status["observed_generation"]) != ("converged", generation):
            return False
    return True


async def _sources(mediamtx: httpx.AsyncClient, devices: list[tuple[str, str, str]]) -> bool:
    return all([await path_source(mediamtx, path) == source for _, path, source in devices])
