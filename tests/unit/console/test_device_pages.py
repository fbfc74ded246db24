"""The device pages over the Sense fake (`MemorySenseReconciler`, whose contract suite the real client
passes too): what the operator sees and what the forms send, without a Sense on the wire."""

from __future__ import annotations

import uuid

from console.adapters.memory import MemorySenseReconciler
from console.domain.identity import PERMISSIONS, User
from tests.unit.console.conftest import ClientFactory, signed_in, with_fakes

OPERATOR = User("alice", frozenset(PERMISSIONS), "unused")


def form(csrf: str, path: str, tenant: str = "tenant-a") -> dict[str, str]:
    return {
        "csrf": csrf, "tenant_id": tenant, "site_id": "site-1", "name": f"camera {path}", "path_name": path,
        "source_uri": "rtsp://viewer:secret-pw@10.0.0.1:554/stream", "desired_state": "enabled",
    }  # fmt: skip


async def test_a_created_device_is_shown_and_listed_without_its_source(client_for: ClientFactory) -> None:
    client = client_for()
    csrf = await signed_in(client, "alice", "sense:operate")
    sense = MemorySenseReconciler()
    with_fakes(client, sense=sense)
    created = await client.post("/devices", data=form(csrf, "cam-1"))
    assert created.status_code == 303
    [device] = sense.devices_by_id.values()
    assert created.headers["location"] == f"/devices/{device['id']}"
    page = await client.get(created.headers["location"])
    assert page.status_code == 200 and "camera cam-1" in page.text and "secret-pw" not in page.text
    listed = await client.get("/devices", params={"tenant_id": "tenant-a"})
    assert listed.status_code == 200 and device["id"] in listed.text


async def test_a_path_name_sense_refuses_is_shown_beside_the_field(client_for: ClientFactory) -> None:
    client = client_for()
    csrf = await signed_in(client, "alice", "sense:operate")
    sense = MemorySenseReconciler()
    await sense.create_device(OPERATOR, {**form(csrf, "taken"), "desired_state": "disabled"})
    with_fakes(client, sense=sense)
    refused = await client.post("/devices", data=form(csrf, "taken", tenant="tenant-b"))
    assert refused.status_code == 422
    assert 'id="path_name-error"' in refused.text and "path_name_taken" in refused.text
    assert "secret-pw" not in refused.text and len(sense.devices_by_id) == 1


async def test_the_batch_sets_the_selected_devices_and_says_how_many(client_for: ClientFactory) -> None:
    client = client_for()
    csrf = await signed_in(client, "alice", "sense:operate")
    sense = MemorySenseReconciler()
    ids = [(await sense.create_device(OPERATOR, form(csrf, f"cam-{n}")))["id"] for n in range(3)]
    with_fakes(client, sense=sense)
    answer = await client.post(
        "/devices/batch", data={"csrf": csrf, "desired_state": "disabled", "device_id": ids[:2]}
    )
    assert answer.status_code == 303
    states = [sense.devices_by_id[i]["desired_state"] for i in ids]
    assert states == ["disabled", "disabled", "enabled"]
    assert "2 device(s) set to disabled." in (await client.get("/devices")).text


async def test_an_unknown_device_is_the_404_page(client_for: ClientFactory) -> None:
    client = client_for()
    await signed_in(client, "alice", "sense:operate")
    with_fakes(client, sense=MemorySenseReconciler())
    page = await client.get(f"/devices/{uuid.uuid4()}", headers={"accept": "text/html"})
    assert page.status_code == 404 and "device_not_found" in page.text
