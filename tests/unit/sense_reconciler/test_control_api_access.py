"""Who may call the Control API, and who the audit trail names: the OpenID provider's access tokens
(`LocalIssuer`, proven equal to Hydra by tests/ports/platform/test_issuers.py) on the in-memory fakes.

Every refused request is checked to have changed nothing: no device, no audit fact, no outbox event."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from sense_reconciler.adapters.memory import MemoryBell, MemorySense
from sense_reconciler.bootstrap import SenseUseCases
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.entrypoints.api import SATISFIED_BY, install, openapi_document
from sense_reconciler.service_layer.audit_pusher import AuditPusher
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import AUDIENCE
from tests.support.issuers import LocalIssuer
from tests.support.sense_devices import device_body
from tests.support.stack import problem_code
from tests.unit.sense_reconciler.conftest import device_service
from yovision_platform.messaging import AvroSerde
from yovision_platform.security import KeyRing, SigningKey
from yovision_platform.web import AUDIENCES, PERMISSIONS, create_app, use_access_token_verifier

OPERATE, READ = "sense:operate", "sense:read"
BOTH = (OPERATE, READ)
SERVERS = frozenset({"mtx-a", "mtx-b"})
PUSH = AuditPushConfig(
    "https://bell.internal",
    KeyRing([SigningKey("sense-1", secrets.token_bytes(32))], active_key_id="sense-1"),
    lease_seconds=3.0,
    request_deadline_seconds=1.0,
)


@dataclass(frozen=True)
class Operation:
    method: str
    template: str  # as the router declares it
    needs: str
    body: dict[str, Any] | None = None

    def url(self, device_id: str) -> str:
        url = self.template.format(device_id=device_id, tenant_id="tenant-a", site_id="site-1")
        return f"{url}?device_id={device_id}" if self.template == "/v1/reconcile-statuses" else url

    def request(self, api: httpx.AsyncClient, device_id: str, headers: dict[str, str]) -> Any:
        body = self.body
        if self.template == "/v1/devices:set-desired-state":
            body = {"items": [{"device_id": device_id, "desired_state": "disabled"}]}
        return api.request(self.method, self.url(device_id), json=body, headers=headers)


# Every operation of the Control API (test_the_operations_are_every_route keeps the list whole); each one,
# permitted, succeeds on the device `device` creates, so only the defence under test can refuse it.
OPERATIONS = (
    Operation("POST", "/v1/devices", OPERATE, device_body()),
    Operation("PATCH", "/v1/devices/{device_id}", OPERATE, {"name": "Renamed"}),
    Operation("PUT", "/v1/devices/{device_id}/desired-state", OPERATE, {"desired_state": "disabled"}),
    Operation("POST", "/v1/devices:set-desired-state", OPERATE),
    Operation("PUT", "/v1/sites/{tenant_id}/{site_id}", OPERATE, {"media_server_id": "mtx-b"}),
    Operation("GET", "/v1/devices", READ),
    Operation("GET", "/v1/devices/{device_id}", READ),
    Operation("GET", "/v1/devices/{device_id}/reconcile-status", READ),
    Operation("GET", "/v1/reconcile-statuses", READ),
    Operation("GET", "/v1/sites/{tenant_id}/{site_id}", READ),
)
CHANGES = [op for op in OPERATIONS if op.needs == OPERATE]
READS = [op for op in OPERATIONS if op.needs == READ]


@pytest.fixture
def issuer() -> LocalIssuer:
    return LocalIssuer()


@pytest.fixture
def fleet_devices(sense: MemorySense, serde: AvroSerde, sources: SourceUris) -> Devices:
    """Two MediaMTX servers, so a site move (a change with audit facts) is one of the operations."""
    return device_service(sense, serde, sources, media_servers=SERVERS, default_media_server="mtx-a")


@pytest.fixture
async def api(fleet_devices: Devices, issuer: LocalIssuer) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app("test", "0")
    install(app, SenseUseCases(devices=fleet_devices, sites=fleet_devices.sites))
    verifier = issuer.verifier(AUDIENCE)
    use_access_token_verifier(app, verifier)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sense.test") as client:
        yield client
    await verifier.keys.aclose()
    await verifier.keys.http.aclose()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def user(issuer: LocalIssuer, *permissions: str, subject: str = "alice") -> dict[str, str]:
    return bearer(issuer.token(subject, *permissions, audience=AUDIENCE))


@pytest.fixture
async def device(api: httpx.AsyncClient, issuer: LocalIssuer) -> str:
    created = await api.post("/v1/devices", json=device_body(), headers=user(issuer, OPERATE))
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def written(sense: MemorySense) -> tuple[int, int, int, int]:
    """Devices, sites, audit facts and outbox events: what any change writes."""
    state = sense.state
    return len(state.devices), len(state.sites), len(state.facts), len(sense.outbox.committed)


async def unauthorized_body(api: httpx.AsyncClient) -> bytes:
    """The one answer to every bad credential: the one without any."""
    response = await api.get("/v1/devices")
    assert (response.status_code, problem_code(response)) == (401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    return response.content


def test_sense_checks_the_platforms_permissions() -> None:
    assert set(SATISFIED_BY) == {OPERATE, READ} and set().union(*SATISFIED_BY.values()) <= set(PERMISSIONS)


def test_the_operations_are_every_route(fleet_devices: Devices) -> None:
    paths: dict[str, dict[str, object]] = openapi_document()["paths"]  # type: ignore[assignment]
    routes = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert routes == {(op.method, op.template) for op in OPERATIONS}


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: f"{op.method} {op.template}")
async def test_every_route_answers_a_bad_credential_with_the_same_401_and_changes_nothing(
    api: httpx.AsyncClient, issuer: LocalIssuer, sense: MemorySense, device: str, operation: Operation
) -> None:
    expected = await unauthorized_body(api)
    before = written(sense)
    foreign = LocalIssuer()  # the same issuer URL, other keys: a token it signs is forged here
    other_issuer = LocalIssuer(issuer="http://127.0.0.1:14445", _keys=issuer._keys)
    for headers in (
        {},
        {"Authorization": ""},
        {"Authorization": "Basic a"},
        bearer("x" * 40),
        bearer(foreign.token("alice", *BOTH, audience=AUDIENCE)),
        bearer(other_issuer.token("alice", *BOTH, audience=AUDIENCE)),
        bearer(issuer.token("alice", *BOTH, audience="signal-watcher")),
    ):
        response = await operation.request(api, device, headers)
        assert (response.status_code, response.content) == (401, expected), headers
    assert written(sense) == before


@pytest.mark.parametrize("audience", sorted(set(AUDIENCES) - {AUDIENCE}))
async def test_a_token_for_another_service_is_refused(
    api: httpx.AsyncClient, issuer: LocalIssuer, sense: MemorySense, audience: str
) -> None:
    expected = await unauthorized_body(api)
    token = await issuer.user_token("alice", BOTH, [audience])
    response = await api.post("/v1/devices", json=device_body(), headers=bearer(token))
    assert (response.status_code, response.content) == (401, expected)
    assert written(sense) == (0, 0, 0, 0)
    both = await issuer.user_token("alice", BOTH, [audience, AUDIENCE])  # naming Sense too: accepted
    assert (await api.post("/v1/devices", json=device_body(), headers=bearer(both))).status_code == 201


@pytest.mark.parametrize("operation", CHANGES, ids=lambda op: f"{op.method} {op.template}")
async def test_a_read_only_token_changes_nothing(
    api: httpx.AsyncClient, issuer: LocalIssuer, sense: MemorySense, device: str, operation: Operation
) -> None:
    before = written(sense)
    response = await operation.request(api, device, user(issuer, READ))
    assert (response.status_code, problem_code(response)) == (403, "forbidden")
    assert response.json()["detail"] == "requires the permission sense:operate"
    assert written(sense) == before
    permitted = await operation.request(api, device, user(issuer, OPERATE))
    assert permitted.status_code in (200, 201), permitted.text


@pytest.mark.parametrize("operation", READS, ids=lambda op: f"{op.method} {op.template}")
async def test_reading_needs_sense_read_or_sense_operate(
    api: httpx.AsyncClient, issuer: LocalIssuer, device: str, operation: Operation
) -> None:
    for permissions in ((), ("signal:read", "orphan:read", "bell:audit-read", "media:drain")):
        refused = await operation.request(api, device, user(issuer, *permissions))
        assert (refused.status_code, problem_code(refused)) == (403, "forbidden")
        assert refused.json()["detail"] == "requires the permission sense:read"
    for permissions in ((READ,), (OPERATE,), BOTH):
        read = await operation.request(api, device, user(issuer, *permissions))
        assert read.status_code == 200, (permissions, read.text)


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: f"{op.method} {op.template}")
@pytest.mark.parametrize("header", ["X-Actor", "x-actor"])
@pytest.mark.parametrize("value", ["mallory", "alice", ""])
async def test_a_request_naming_an_actor_is_refused_before_any_work(
    api: httpx.AsyncClient,
    issuer: LocalIssuer,
    sense: MemorySense,
    device: str,
    operation: Operation,
    header: str,
    value: str,
) -> None:
    """Even the token's own subject: no header names the actor any more, whatever it says."""
    expected = await unauthorized_body(api)
    before = written(sense)
    response = await operation.request(api, device, {**user(issuer, *BOTH), header: value})
    assert (response.status_code, response.content) == (401, expected)
    assert written(sense) == before


async def changes_by(api: httpx.AsyncClient, headers: dict[str, str]) -> None:
    """Every kind of change, each writing audit facts: create, rename, desired state, batch, site move."""
    created = await api.post("/v1/devices", json=device_body(desired_state="disabled"), headers=headers)
    assert created.status_code == 201, created.text
    url = f"/v1/devices/{created.json()['id']}"
    items = [{"device_id": created.json()["id"], "desired_state": "disabled"}]
    for response in (
        await api.patch(url, json={"name": "Renamed"}, headers=headers),
        await api.put(f"{url}/desired-state", json={"desired_state": "enabled"}, headers=headers),
        await api.post("/v1/devices:set-desired-state", json={"items": items}, headers=headers),
        await api.put("/v1/sites/tenant-a/site-1", json={"media_server_id": "mtx-b"}, headers=headers),
    ):
        assert response.status_code == 200, response.text


async def actors(sense: MemorySense, serde: AvroSerde) -> tuple[list[str], list[str], list[str]]:
    """The actor of every change as Sense keeps it (the push's outbox), as its DeviceAuditRecorded events
    on Kafka carry it, and as Bell receives it through the signed push."""
    facts = [fact.actor for fact in sense.state.facts]
    events = [
        serde.decode(message.value).record["actor"]
        for message in sense.outbox.committed
        if message.event_type == "DeviceAuditRecorded"
    ]
    bell = MemoryBell()
    store = sense.audit_push_store("pusher", lease_seconds=PUSH.lease_seconds)
    assert (await AuditPusher(store, bell, PUSH).run_once()).delivered == len(facts)
    return facts, events, [document["actor"] for document in bell.stored.values()]


def one_actor(channels: Sequence[list[str]], expected: str, changes: int) -> bool:
    return all(channel == [expected] * changes for channel in channels)


@pytest.mark.parametrize(
    "subject",
    [
        "alice",
        "f3a7c2d0-1b4e-4c1a-9f6e-2d8b7a5c4e10",  # Hydra's subjects are often UUIDs
        "user@example.org",
        "auth0:5f7c8ec7c33c6c004bbafe82",
        "x" * 120 + "._:@-Az9",  # the longest subject the platform accepts, every allowed character
    ],
)
async def test_the_actor_of_every_change_is_the_users_subject_on_both_channels(
    api: httpx.AsyncClient, issuer: LocalIssuer, sense: MemorySense, serde: AvroSerde, subject: str
) -> None:
    token = await issuer.user_token(subject, [OPERATE], [AUDIENCE])
    await changes_by(api, bearer(token))
    facts, events, pushed = await actors(sense, serde)
    assert len(facts) == 5  # create, rename, desired state, batch, the site move of its one device
    assert one_actor((facts, events, pushed), subject, 5)


async def test_a_machine_tokens_actor_is_its_client_id(
    api: httpx.AsyncClient, issuer: LocalIssuer, sense: MemorySense, serde: AvroSerde
) -> None:
    token = await issuer.machine_token("bench", BOTH, [AUDIENCE])
    await changes_by(api, bearer(token))
    assert one_actor(await actors(sense, serde), "bench", 5)


def test_the_published_document_says_how_every_operation_authenticates(fleet_devices: Devices) -> None:
    document: Any = openapi_document()
    assert set(document["components"]["securitySchemes"]) == {"bearerJwt"}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            assert operation["security"] == [{"bearerJwt": []}], where
            assert all(p["name"].lower() != "x-actor" for p in operation.get("parameters", [])), where
            assert (
                "`X-Actor` header (refused: the actor is the access token's subject)"
                in (operation["responses"]["401"]["description"])
            ), where
            needed = OPERATE if method in ("post", "put", "patch") else READ
            assert f"`{needed}`" in operation["responses"]["403"]["description"], where
