from __future__ import annotations

import functools
import ipaddress
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import asyncpg
import httpcore
import httpx
import pytest

import signal_watcher
from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.probe_client import GuardedNetworkBackend, ProbeClient
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.bootstrap import SignalUseCases, UseCaseLimits, bootstrap
from signal_watcher.domain.checking import CheckDecision
from signal_watcher.domain.model import CompareMode, Method, WatcherSpec
from signal_watcher.domain.records import CheckRow, WatcherRecord
from signal_watcher.domain.ssrf import STRICT_GUARD, AddressGuard, IpAddress, parse_networks
from signal_watcher.entrypoints.api import include_api
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.metrics import SignalMetrics
from signal_watcher.service_layer.ports import Probe, UnitOfWorkFactory
from signal_watcher.settings import AUDIENCE
from tests.support.fixture_server import FixtureServer
from tests.support.issuers import LocalIssuer
from tests.support.postgres import migrated_schema_fixture, runtime_pool_fixture
from tests.support.stack import MigratedSchema
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.storage import Identifier
from yovision_platform.tools.environment import TEST_PROBE_ONLY_NETWORKS
from yovision_platform.web import create_app, use_access_token_verifier

FIXTURE_HOST = "fixture.example.com"
LOOPBACK_NETWORK = ipaddress.ip_network("127.0.0.0/8")
# Every guard a test probes with is confined as every test environment is (SIGNAL_PROBE_ONLY_NETWORKS =
# TEST_PROBE_ONLY_NETWORKS, one constant for all tiers): `probes_stay_confined` fails a test whose probe
# connects through a guard without it.
TEST_NETWORKS = parse_networks(TEST_PROBE_ONLY_NETWORKS)
# as SIGNAL_PROBE_ALLOWED_NETWORKS=127.0.0.0/8 with SIGNAL_PROBE_ONLY_NETWORKS=TEST_PROBE_ONLY_NETWORKS
LOOPBACK_FOR_TESTS = AddressGuard.allowing([LOOPBACK_NETWORK]).confined_to(TEST_NETWORKS)
CONFINED_STRICT_GUARD = STRICT_GUARD.confined_to(TEST_NETWORKS)  # the production SSRF rule, confined
# The OpenID provider of the in-process API (`api_client`): one for the session, its key made once.
ISSUER = LocalIssuer()


class Bearer(Mapping[str, str]):
    """The `Authorization` header of `subject` with `permissions`, for `audience` (default this service's):
    a fresh access token of `ISSUER` each time a request reads it, so a module-level `ALICE` never outlives
    its token (they live 15 minutes, a test session may run longer)."""

    def __init__(self, subject: str, *permissions: str, audience: str = AUDIENCE) -> None:
        self.subject, self.permissions, self.audience = subject, permissions, audience

    def __getitem__(self, name: str) -> str:
        if name != "Authorization":
            raise KeyError(name)
        return f"Bearer {ISSUER.token(self.subject, *self.permissions, audience=self.audience)}"

    def __iter__(self) -> Iterator[str]:
        return iter(("Authorization",))

    def __len__(self) -> int:
        return 1


@dataclass
class Connections:
    """What probes did at the socket layer during one test: every TCP connection the probe client's network
    backend (`GuardedNetworkBackend`, through httpcore's AnyIO backend, the only thing it opens connections
    with) asked for after its checks, and those refused because they broke the test confinement."""

    attempts: list[str] = field(default_factory=list)
    unconfined: list[str] = field(default_factory=list)


_PROBING_GUARD: ContextVar[AddressGuard | None] = ContextVar("probing_guard", default=None)


@pytest.fixture(autouse=True)
def probes_stay_confined(monkeypatch: pytest.MonkeyPatch) -> Iterator[Connections]:
    """Autouse in every signal-watcher tier that runs the real probe client: each connection it opens must
    come from a confined guard and go to an address inside TEST_NETWORKS;
    anything else is refused before the socket (a connect error) and fails the test at teardown. The fixture's
    value counts the attempts, for tests that prove a refusal opened no connection."""
    connections = Connections()
    checked_connect = GuardedNetworkBackend.connect_tcp
    open_connection = httpcore.AnyIOBackend.connect_tcp

    async def guarded(self: GuardedNetworkBackend, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        token = _PROBING_GUARD.set(self.guard)
        try:
            return await checked_connect(self, host, port, *args, **kwargs)
        finally:
            _PROBING_GUARD.reset(token)

    async def counted(self: httpcore.AnyIOBackend, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        guard = _PROBING_GUARD.get()
        if guard is None:  # not a probe: a test's own HTTP client (to a service process, say)
            return await open_connection(self, host, port, *args, **kwargs)
        connections.attempts.append(host)
        address = ipaddress.ip_address(host)
        inside = any(address in n for n in TEST_NETWORKS if n.version == address.version)
        if not guard.is_confined or not inside:
            connections.unconfined.append(host)
            raise httpcore.ConnectError("refused by the test confinement")
        return await open_connection(self, host, port, *args, **kwargs)

    monkeypatch.setattr(GuardedNetworkBackend, "connect_tcp", guarded)
    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", counted)
    yield connections
    assert not connections.unconfined, (
        "a probe connected without the test confinement (build its guard from TEST_NETWORKS: "
        f"LOOPBACK_FOR_TESTS or CONFINED_STRICT_GUARD): {connections.unconfined}"
    )


def fake_resolver(table: Mapping[str, Sequence[str]]):  # type: ignore[no-untyped-def]
    """A resolver port that answers from `table` (name -> addresses) and fails for other names."""

    async def resolve(host: str, port: int) -> list[IpAddress]:
        if host not in table:
            raise OSError("no such name")
        return [ipaddress.ip_address(a) for a in table[host]]

    return resolve


@pytest.fixture
async def fixture_server() -> AsyncIterator[FixtureServer]:
    server = await FixtureServer().start()
    yield server
    await server.stop()


@pytest.fixture
async def local_probe() -> AsyncIterator[ProbeClient]:
    """A probe client that may reach 127.0.0.1 fixture servers via the name FIXTURE_HOST (tests only)."""
    client = ProbeClient(resolver=fake_resolver({FIXTURE_HOST: ["127.0.0.1"]}), guard=LOOPBACK_FOR_TESTS)
    yield client
    await client.aclose()


SIGNAL_MIGRATIONS = Path(signal_watcher.__file__).resolve().parent / "migrations"


signal_db = migrated_schema_fixture(SIGNAL_MIGRATIONS, name="signal_db")
pool = runtime_pool_fixture("signal_db", name="pool", max_size=8)


def cipher_for(key: bytes, key_id: str = "k1") -> SecretCipher:
    return SecretCipher(EncryptionKeyRing({key_id: key}, key_id, accept_legacy=True))


@pytest.fixture
def cipher() -> SecretCipher:
    return cipher_for(os.urandom(32))


@pytest.fixture
def units(pool: asyncpg.Pool, signal_db: MigratedSchema, cipher: SecretCipher) -> PostgresUnitsOfWork:
    return PostgresUnitsOfWork(pool, signal_db.name, cipher)


@pytest.fixture(scope="session")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


@pytest.fixture
def runner(units: PostgresUnitsOfWork, local_probe: ProbeClient, serde: AvroSerde) -> CheckRunner:
    return use_cases_on(units, local_probe).check_runner


@functools.cache
def shared_serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())


def use_cases_on(
    units: UnitOfWorkFactory,
    probe: Probe,
    *,
    max_watchers_per_user: int = 10,
    check_requested: Callable[[], None] = lambda: None,
    metrics: SignalMetrics | None = None,
    topic_overrides: Mapping[str, str] | None = None,
) -> SignalUseCases:
    """The use cases as `bootstrap` makes them, on `units` and `probe`."""
    return bootstrap(
        UseCaseLimits(max_watchers_per_user=max_watchers_per_user),
        units_of_work=units,
        probe=probe,
        serde=shared_serde(),
        metrics=metrics,
        check_requested=check_requested,
        topic_overrides=topic_overrides,
    )


def api_client(
    units: UnitOfWorkFactory,
    probe: Probe,
    *,
    max_watchers_per_user: int = 10,
    check_requested: Callable[[], None] = lambda: None,
) -> httpx.AsyncClient:
    """The user API as served (the platform app, its problem handlers), on `units` and `probe`, taking the
    access tokens of `ISSUER` for this service (`Bearer`)."""
    app = create_app("test", "0")
    use_cases = use_cases_on(
        units, probe, max_watchers_per_user=max_watchers_per_user, check_requested=check_requested
    )
    include_api(app, use_cases)
    use_access_token_verifier(app, ISSUER.verifier(AUDIENCE))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


def make_spec(url: str, **changes: Any) -> WatcherSpec:
    spec = WatcherSpec(
        name="watch",
        agent_id="agent-1",
        url=url,
        method=Method.GET,
        headers=(),
        body=None,
        interval_minutes=10,
        compare_mode=CompareMode.HASH,
        json_path=None,
        prompt_template="{name} changed: {diff}",
    )
    return replace(spec, **changes).validated()


async def make_due(pool: asyncpg.Pool, schema: Identifier, watcher_id: uuid.UUID | None = None) -> None:
    async with pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {schema.quoted}.watchers SET next_check_at = now() WHERE ($1::uuid IS NULL OR id = $1)",
            watcher_id,
        )


async def claim_and_run(
    units: UnitOfWorkFactory, runner: CheckRunner, watcher_id: uuid.UUID
) -> CheckDecision | None:
    """Claim the earliest due watcher, which must be `watcher_id`, as the scheduler would, and run its
    check."""
    async with units() as uow:
        [claimed] = await uow.watchers.claim_due("test", limit=1, lease_seconds=60)
    assert claimed.watcher_id == watcher_id
    return await runner.run(claimed)


async def check_now(
    units: PostgresUnitsOfWork, runner: CheckRunner, watcher_id: uuid.UUID
) -> CheckDecision | None:
    """Make the watcher the earliest due one and run one check of it."""
    await units.pool.execute(
        f"UPDATE {units.schema.quoted}.watchers SET next_check_at = now() - interval '1 day' WHERE id = $1",
        watcher_id,
    )
    return await claim_and_run(units, runner, watcher_id)


class Wakes:
    """A scheduler's wake-up callback that counts its calls."""

    count = 0

    def __call__(self) -> None:
        self.count += 1


@pytest.fixture
def wakes() -> Wakes:
    return Wakes()


async def insert(units: UnitOfWorkFactory, user: str, spec: WatcherSpec) -> WatcherRecord:
    async with units() as uow:
        return await uow.watchers.insert(user, spec)


async def stored(units: UnitOfWorkFactory, user: str, watcher_id: uuid.UUID) -> WatcherRecord:
    async with units() as uow:
        record = await uow.watchers.get(user, watcher_id)
    assert record is not None
    return record


async def checks_of(units: UnitOfWorkFactory, watcher_id: uuid.UUID) -> list[CheckRow]:
    async with units() as uow:
        return await uow.checks.list_for_watcher(watcher_id, limit=100)


async def outbox_events(
    pool: asyncpg.Pool, schema: Identifier, serde: AvroSerde
) -> list[tuple[str, str, dict[str, Any]]]:
    """(topic, event_type, decoded record) of every outbox row, oldest first."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(f"SELECT topic, event_type, value FROM {schema.quoted}.outbox ORDER BY id")
    return [(r["topic"], r["event_type"], dict(serde.decode(r["value"]).record)) for r in rows]
