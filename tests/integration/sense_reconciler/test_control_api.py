"""Control API v1 over HTTP (in-process ASGI), real PostgreSQL: access tokens (`LocalIssuer`, proven equal
to Hydra by tests/ports/platform/test_issuers.py), the actor each change records, codes, no source URI
anywhere."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from sense_reconciler.bootstrap import SenseUseCases
from sense_reconciler.domain import limits
from sense_reconciler.entrypoints.api import install, openapi_document
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.settings import AUDIENCE
from tests.support.issuers import LocalIssuer
from tests.support.sense_devices import device_body as sense_device_body
from tests.support.stack import MigratedSchema, problem_code
from yovision_platform.messaging import AvroSerde
from yovision_platform.web import create_app, use_access_token_verifier

SECRET = "s3cr3t-pw"
OPENAPI_FILE = Path(__file__).resolve().parents[3] / "schemas/openapi/sense-reconciler.v1.json"
ISSUER = LocalIssuer()
OPERATOR = "alice"  # the subject of the `api` client's token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def api(devices: Devices) -> AsyncIterator[httpx.AsyncClient]:
    """The Control API with an operator's token (`sense:operate` and `sense:read`) on every request."""
    app = create_app("test", "0")
    install(app, SenseUseCases(devices=devices, sites=devices.sites))
    verifier = ISSUER.verifier(AUDIENCE)
    use_access_token_verifier(app, verifier)
    token = ISSUER.token(OPERATOR, "sense:operate", "sense:read", audience=AUDIENCE)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://sense.test", headers=bearer(token)
    ) as client:
        yield client
    await verifier.keys.aclose()
    await verifier.keys.http.aclose()


def device_body(**overrides: object) -> dict[str, object]:
    return sense_device_body(userinfo=f"admin:{SECRET}", **overrides)


async def written(pool: asyncpg.Pool, schema: MigratedSchema) -> tuple[int, int, int]:
    """Devices, device-audit facts (the push's outbox) and Kafka outbox events."""
    s = schema.name.quoted
    row = await pool.fetchrow(
        f"SELECT (SELECT count(*) FROM {s}.devices) AS devices, "
        f"(SELECT count(*) FROM {s}.device_operation_outbox) AS facts, "
        f"(SELECT count(*) FROM {s}.outbox) AS events"
    )
    assert row is not None
    return row["devices"], row["facts"], row["events"]


async def recorded_actors(
    pool: asyncpg.Pool, schema: MigratedSchema, serde: AvroSerde
) -> tuple[list[str], list[str]]:
    """The actor of every change: in the device-audit facts the signed push sends Bell, and in the
    DeviceAuditRecorded events the outbox relay publishes to Kafka."""
    s = schema.name.quoted
    facts = [
        r["actor"] for r in await pool.fetch(f"SELECT actor FROM {s}.device_operation_outbox ORDER BY id")
    ]
    events = [
        serde.decode(bytes(r["value"])).record["actor"]
        for r in await pool.fetch(
            f"SELECT value FROM {s}.outbox WHERE event_type = 'DeviceAuditRecorded' ORDER BY id"
        )
    ]
    return facts, events


async def test_every_bad_credential_is_the_same_401(api: httpx.AsyncClient) -> None:
    answers = set()
    for headers in (
        {"Authorization": ""},
        bearer("x" * 40),
        {"Authorization": "Basic a"},
        bearer(ISSUER.token(OPERATOR, "sense:operate", "sense:read", audience="orphan-scanner")),
        bearer(LocalIssuer().token(OPERATOR, "sense:operate", "sense:read", audience=AUDIENCE)),
    ):
        response = await api.get("/v1/devices", headers=headers)
        assert (response.status_code, problem_code(response)) == (401, "unauthorized")
        answers.add(response.content)
    assert len(answers) == 1


async def test_a_forged_actor_header_is_refused_and_nothing_is_written(
    api: httpx.AsyncClient, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    unauthorized = await api.get("/v1/devices", headers={"Authorization": ""})
    refused = await api.post("/v1/devices", json=device_body(), headers={"X-Actor": "operator:mallory"})
    assert (refused.status_code, refused.content) == (401, unauthorized.content)
    assert await written(sense_pool, sense_schema) == (0, 0, 0)
    created = await api.post("/v1/devices", json=device_body())
    assert created.status_code == 201
    before = await written(sense_pool, sense_schema)
    url = f"/v1/devices/{created.json()['id']}"
    patched = await api.patch(url, json={"name": "Renamed"}, headers={"X-Actor": OPERATOR})
    assert (patched.status_code, patched.content) == (401, unauthorized.content)
    assert await written(sense_pool, sense_schema) == before
    assert (await api.get(url)).json()["name"] == "Lobby"


async def test_read_only_tokens_change_nothing_and_tokens_without_sense_read_nothing(
    api: httpx.AsyncClient, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema
) -> None:
    reader = bearer(ISSUER.token("viewer", "sense:read", audience=AUDIENCE))
    refused = await api.post("/v1/devices", json=device_body(), headers=reader)
    assert (refused.status_code, problem_code(refused)) == (403, "forbidden")
    assert refused.json()["detail"] == "requires the permission sense:operate"
    assert await written(sense_pool, sense_schema) == (0, 0, 0)
    assert (await api.get("/v1/devices", headers=reader)).status_code == 200
    stranger = bearer(ISSUER.token("viewer", "signal:read", audience=AUDIENCE))
    unread = await api.get("/v1/devices", headers=stranger)
    assert (unread.status_code, problem_code(unread)) == (403, "forbidden")
    assert unread.json()["detail"] == "requires the permission sense:read"


async def test_the_recorded_actor_is_the_tokens_subject_user_or_machine_client(
    api: httpx.AsyncClient, sense_pool: asyncpg.Pool, sense_schema: MigratedSchema, serde: AvroSerde
) -> None:
    machine = bearer(await ISSUER.machine_token("operator-cli", ["sense:operate"], [AUDIENCE]))
    by_user = await api.post("/v1/devices", json=device_body(desired_state="disabled"))
    by_machine = await api.put(
        f"/v1/devices/{by_user.json()['id']}/desired-state",
        json={"desired_state": "enabled"},
        headers=machine,
    )
    assert (by_user.status_code, by_machine.status_code) == (201, 200)
    facts, events = await recorded_actors(sense_pool, sense_schema, serde)
    assert facts == events == [OPERATOR, "operator-cli"]


async def test_device_lifecycle_never_returns_or_logs_the_source_uri(
    api: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bodies: list[str] = []
    created = await api.post("/v1/devices", json=device_body())
    assert created.status_code == 201, created.text
    device = created.json()
    assert set(device) == {
        "id",
        "tenant_id",
        "site_id",
        "name",
        "path_name",
        "media_server_id",
        "desired_state",
        "config_version",
        "created_at",
        "updated_at",
    }
    assert device["media_server_id"] == "default"
    url = f"/v1/devices/{device['id']}"
    for response in (
        created,
        await api.get(url),
        await api.get("/v1/devices", params={"tenant_id": "tenant-a"}),
        await api.patch(url, json={"source_uri": f"rtsp://admin:{SECRET}x@10.1.2.3/live"}),
        await api.put(f"{url}/desired-state", json={"desired_state": "disabled"}),
        await api.post(
            "/v1/devices:set-desired-state",
            json={"items": [{"device_id": device["id"], "desired_state": "enabled"}]},
        ),
        await api.get(f"{url}/reconcile-status"),
        await api.post("/v1/devices", json=device_body(path_name="bad//name")),
        await api.post("/v1/devices", json=device_body(desired_state="maybe")),
        await api.post("/v1/devices", json=device_body(source_uri=f"http://u:{SECRET}@h/x")),
        await api.patch(
            url, json={"source_uri": f"rtsp://u:{SECRET}@h/x" + "a" * limits.SOURCE_URI_MAX_CHARS}
        ),
    ):
        assert response.status_code < 500
        bodies.append(response.text)
    assert all(SECRET not in body for body in bodies)
    assert SECRET not in caplog.text
    assert (await api.get(url)).json()["config_version"] == 4
    status = (await api.get(f"{url}/reconcile-status")).json()
    assert status["status"] == "pending" and status["desired_generation"] == 4


async def test_error_codes_are_stable(api: httpx.AsyncClient) -> None:
    missing = await api.get(f"/v1/devices/{uuid.uuid4()}")
    assert (missing.status_code, problem_code(missing)) == (404, "device_not_found")
    body = device_body()
    assert (await api.post("/v1/devices", json=body)).status_code == 201
    taken = await api.post("/v1/devices", json=body)
    assert (taken.status_code, problem_code(taken)) == (409, "path_name_taken")
    bad_uri = await api.post("/v1/devices", json=device_body(source_uri="http://h/x"))
    assert (bad_uri.status_code, problem_code(bad_uri)) == (422, "invalid_source_uri")


async def test_a_device_listed_twice_in_a_batch_takes_its_last_state_and_changes_once(
    api: httpx.AsyncClient,
) -> None:
    """Each change of a device's desired state makes it due once more (a new desired generation)."""
    created = await api.post("/v1/devices", json=device_body(desired_state="disabled"))
    device_id = created.json()["id"]
    status_url = f"/v1/devices/{device_id}/reconcile-status"
    same = [{"device_id": device_id, "desired_state": "enabled"}] * 2
    enabled = await api.post("/v1/devices:set-desired-state", json={"items": same})
    assert [d["desired_state"] for d in enabled.json()["items"]] == ["enabled"] * 2
    assert (await api.get(status_url)).json()["desired_generation"] == 2
    both = [{"device_id": device_id, "desired_state": s} for s in ("disabled", "enabled", "disabled")]
    last = await api.post("/v1/devices:set-desired-state", json={"items": both})
    assert last.status_code == 200
    assert [d["desired_state"] for d in last.json()["items"]] == ["disabled"] * 3
    assert (await api.get(f"/v1/devices/{device_id}")).json()["desired_state"] == "disabled"
    assert (await api.get(status_url)).json()["desired_generation"] == 3


@pytest.mark.parametrize("value", [True, "5", 5.5])
async def test_a_site_limit_is_a_json_integer(api: httpx.AsyncClient, value: object) -> None:
    refused = await api.put("/v1/sites/t-json/s-json", json={"max_video_channels": value})
    assert (refused.status_code, problem_code(refused)) == (422, "invalid_request")
    assert (await api.put("/v1/sites/t-json/s-json", json={"max_video_channels": 5.0})).status_code == 200


@pytest.mark.parametrize(("value", "status"), [(1, 200), (128, 200), (0, 422), (129, 422)])
async def test_site_limit_boundaries(api: httpx.AsyncClient, value: int, status: int) -> None:
    response = await api.put("/v1/sites/tenant-a/site-9", json={"max_video_channels": value})
    assert response.status_code == status


@pytest.mark.parametrize(
    ("path_name", "status"),
    [
        ("site-1/cam-07", 201),
        ("Site_1/lobby.cam-2/main", 201),
        ("x" * (limits.PATH_NAME_MAX_CHARS - 6) + "/cam-1", 201),  # at the maximum
        ("x" * (limits.PATH_NAME_MAX_CHARS - 5) + "/cam-1", 422),  # one over
        ("site-1//cam", 422),
        ("site-1/../cam", 422),
        ("/site-1/cam", 422),
        ("site-1/cam/", 422),
        ("all_others", 422),
        ("site 1/cam", 422),
    ],
)
async def test_path_names_as_mediamtx_accepts_them(
    api: httpx.AsyncClient, path_name: str, status: int
) -> None:
    response = await api.post("/v1/devices", json=device_body(path_name=path_name))
    assert response.status_code == status, response.text
    if status == 422:
        assert problem_code(response) in {"invalid_path_name", "invalid_request"}
        assert path_name not in response.text


async def test_a_site_reports_and_changes_its_media_server(api: httpx.AsyncClient) -> None:
    unseen = await api.get("/v1/sites/tenant-a/nowhere")  # a site Sense never saw: the defaults
    assert unseen.json()["media_server_id"] == "default" and unseen.json()["enabled_devices"] == 0
    assert (await api.post("/v1/devices", json=device_body(site_id="s-2"))).status_code == 201
    site = await api.get("/v1/sites/tenant-a/s-2")
    assert site.json() == {
        "tenant_id": "tenant-a",
        "site_id": "s-2",
        "max_video_channels": 16,
        "media_server_id": "default",
        "enabled_devices": 1,
    }
    unknown = await api.put("/v1/sites/tenant-a/s-2", json={"media_server_id": "mtx-unknown"})
    assert (unknown.status_code, problem_code(unknown)) == (409, "media_server_not_registered")
    bad = await api.put("/v1/sites/tenant-a/s-2", json={"media_server_id": "http://10.0.0.1:9997"})
    assert (bad.status_code, problem_code(bad)) == (422, "invalid_request")
    assert "10.0.0.1" not in bad.text
    empty = await api.put("/v1/sites/tenant-a/s-2", json={})
    assert (empty.status_code, problem_code(empty)) == (422, "invalid_body")
    same = await api.put("/v1/sites/tenant-a/s-2", json={"media_server_id": "default"})
    assert same.status_code == 200 and same.json()["media_server_id"] == "default"


async def test_site_limit_refusal_is_a_clear_error(api: httpx.AsyncClient) -> None:
    assert (await api.put("/v1/sites/tenant-a/one", json={"max_video_channels": 1})).status_code == 200
    assert (await api.post("/v1/devices", json=device_body(site_id="one"))).status_code == 201
    refused = await api.post("/v1/devices", json=device_body(site_id="one"))
    assert (refused.status_code, problem_code(refused)) == (409, "site_video_channel_limit_reached")


@pytest.mark.parametrize(
    ("count", "status"),
    [(limits.SET_DESIRED_STATE_BATCH_MAX_ITEMS, 404), (limits.SET_DESIRED_STATE_BATCH_MAX_ITEMS + 1, 422)],
)
async def test_batch_size_limit(api: httpx.AsyncClient, count: int, status: int) -> None:
    items = [{"device_id": str(uuid.uuid4()), "desired_state": "enabled"} for _ in range(count)]
    response = await api.post("/v1/devices:set-desired-state", json={"items": items})
    assert response.status_code == status


async def test_published_openapi_matches_the_app() -> None:
    document = openapi_document()
    rendered = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if os.environ.get("SENSE_WRITE_OPENAPI") == "1":
        OPENAPI_FILE.write_text(rendered, encoding="utf-8")
    assert OPENAPI_FILE.read_text() == rendered, "regenerate schemas/openapi/sense-reconciler.v1.json"
    assert "source_uri" not in json.dumps(document["components"]["schemas"]["Device"])  # type: ignore[index]


@pytest.mark.parametrize("field", ["tenant_id", "site_id", "name", "path_name", "source_uri"])
async def test_a_nul_in_any_device_text_is_refused_before_any_work(
    api: httpx.AsyncClient, field: str
) -> None:
    body = device_body()
    body[field] = f"{body[field]}\u0000"
    response = await api.post("/v1/devices", json=body)
    assert (response.status_code, problem_code(response)) == (400, "invalid_text")
    assert (await api.get("/v1/devices")).json()["items"] == []
    site = await api.put("/v1/sites/tenant-a/site%00", json={"max_video_channels": 4})
    assert (site.status_code, problem_code(site)) == (400, "invalid_text")


async def test_a_wrong_method_is_405_with_allow_and_unparsable_json_400(api: httpx.AsyncClient) -> None:
    wrong = await api.delete("/v1/devices")
    assert (wrong.status_code, problem_code(wrong)) == (405, "method_not_allowed")
    assert set(wrong.headers["allow"].split(", ")) == {"GET", "POST"}
    broken = await api.post(
        "/v1/devices", content=b'{"name": "rtsp://u:pw@x', headers={"content-type": "application/json"}
    )
    assert (broken.status_code, problem_code(broken)) == (400, "invalid_json")
    assert "pw@x" not in broken.text
