"""Session-wide access to the real stack: one PostgreSQL cluster and one Kafka broker per test run.

The stack is started (or reused) through `infra/scripts/stack.sh up`, the same script `make up` uses. A
test that needs infrastructure never skips when it is missing: the start-up error fails the run.
Tests isolate themselves by unique schema, role and topic names, never by new servers, with one exception:
MediaMTX. Each test session (each pytest-xdist worker) gets a private MediaMTX of its own in place of the
stack's: `make up`'s Sense converges that one, and a test reading a path back must see only writes of its
own session.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import asyncpg
import httpx
import pytest
from aiokafka.admin import NewTopic
from hypothesis import HealthCheck, settings

from tests.support.issuers import HydraIssuer, hydra_issuer
from yovision_platform.localstack import LocalMediaServer, LocalStack, runtime_dsn
from yovision_platform.messaging import KafkaTarget, admin_client
from yovision_platform.security import _redaction as redaction
from yovision_platform.storage import Identifier, SchemaPlan, drop, migrate
from yovision_platform.tools import localhost
from yovision_platform.tools.mediamtx_sandbox import mediamtx_sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]

# Property-based tests: `make test` runs the same examples every time (derandomized); `make fuzz` runs a
# fresh seed (`--hypothesis-seed`, printed by the target) with five times as many examples.
HYPOTHESIS_PROFILE_VARIABLE = "YOVISION_HYPOTHESIS_PROFILE"
settings.register_profile(
    "deterministic",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz", database=None, deadline=None, max_examples=1000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get(HYPOTHESIS_PROFILE_VARIABLE, "deterministic"))


Stack = LocalStack


# `make test-fast` runs the tests marked `fast`: every unit test, and the port contract suites run on the
# in-memory and HTTP-level fakes (no server needed).
FAKE_ADAPTER_CLASS = re.compile(r"Test(?:InMemory|Memory|HttpFake|Fake)[A-Z]")


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker (gw0, gw1...) hands out loopback ports from a slice of its own."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw"):
        os.environ[localhost.PORT_SLICE_VARIABLE] = str(int(worker.removeprefix("gw")) + 1)


def pytest_itemcollected(item: pytest.Item) -> None:
    """The `fast` marker, as each test is collected (before `-m` deselects by it)."""
    path = item.path
    tier = path.relative_to(REPO_ROOT / "tests").parts[0]
    cls = getattr(item, "cls", None)
    if tier == "unit" or (tier == "ports" and cls is not None and FAKE_ADAPTER_CLASS.match(cls.__name__)):
        item.add_marker(pytest.mark.fast)


MEDIAMTX_BIN = REPO_ROOT / ".local/bin/mediamtx"


@pytest.fixture(scope="session")
def shared_stack() -> Stack:
    if os.environ.get("YOVISION_STACK_STARTED") != "1":
        # What `make test` starts: no test needs the stack's Jaeger or Prometheus (they are `make up`'s).
        stack_sh = str(REPO_ROOT / "infra/scripts/stack.sh")
        subprocess.run(["bash", stack_sh, "up", "pg", "kafka", "mediamtx"], check=True, cwd=REPO_ROOT)
    return LocalStack.load(REPO_ROOT / ".local")


@pytest.fixture(scope="session")
async def stack(shared_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """The stack's PostgreSQL and Kafka, and a private MediaMTX (API only) as its one media server."""
    shared = shared_stack
    server = shared.mediamtx
    work_dir = tmp_path_factory.mktemp("mediamtx")
    async with mediamtx_sandbox(MEDIAMTX_BIN, work_dir, label=server.id) as private:
        yield replace(
            shared,
            mediamtx_api_url=private.url,
            media_servers=(LocalMediaServer(server.id, private.url, private.credentials_file),),
        )


@pytest.fixture(autouse=True)
def secrets_registered_by_this_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process-wide secret registry, as it stood before the test (fixtures of wider scope included),
    for this test alone: a secret one test loads (a DSN whose password is `p`) must not mask that letter
    in every later test of the same worker, whose outcome would then hang on the order of the modules."""
    monkeypatch.setattr(redaction, "default_registry", redaction.default_registry.copy())


@pytest.fixture(scope="session")
async def hydra(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[HydraIssuer]:
    """A private ORY Hydra for this test session (each pytest-xdist worker), started on first use, with the
    environment's clients: the issuer of the service processes that integration tests start
    (`<P>AUTH_ISSUER=hydra.issuer`), and of their tokens (`await hydra.user_token(...)`)."""
    async with hydra_issuer(stack.admin_dsn, tmp_path_factory.mktemp("hydra")) as issuer:
        yield issuer


@pytest.fixture
async def admin_conn(stack: Stack) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(stack.admin_dsn)
    try:
        yield conn
    finally:
        await conn.close()


free_port = localhost.free_port
private_file = localhost.write_private_file


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class MigratedSchema:
    name: Identifier
    runtime_role: Identifier
    runtime_password: str
    runtime_dsn: str


async def drop_schema_and_roles(admin: asyncpg.Connection, schema: str) -> None:
    await drop(
        admin, SchemaPlan(Identifier(schema), Identifier(f"{schema}_owner"), Identifier(f"{schema}_app"), ())
    )


runtime_dsn_for = runtime_dsn


async def migrate_test_schema(
    stack: Stack, admin: asyncpg.Connection, name: Identifier, migrations_dir: Path
) -> MigratedSchema:
    """Migrate `name` with the platform track and `migrations_dir`, with a fresh runtime password."""
    password = secrets.token_urlsafe(24)
    plan = SchemaPlan.for_service(name, migrations_dir)
    await migrate(admin, plan, runtime_password=password)
    return MigratedSchema(
        name=name,
        runtime_role=plan.runtime_role,
        runtime_password=password,
        runtime_dsn=runtime_dsn(stack.admin_dsn, plan.runtime_role, password),
    )


@pytest.fixture
async def schema_name(admin_conn: asyncpg.Connection) -> AsyncIterator[Identifier]:
    """A unique schema name (and its roles) dropped after the test."""
    name = Identifier(unique_name("t"))
    yield name
    await drop_schema_and_roles(admin_conn, name)


async def create_topic(kafka: KafkaTarget, name: str, partitions: int) -> None:
    admin = admin_client(kafka)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


async def delete_topic(kafka: KafkaTarget, name: str) -> None:
    admin = admin_client(kafka)
    await admin.start()
    try:
        await admin.delete_topics([name])
    finally:
        await admin.close()


@pytest.fixture
async def topic(stack: Stack) -> AsyncIterator[str]:
    """A unique 3-partition topic, deleted after the test."""
    name = f"test.{uuid.uuid4().hex[:10]}.v1"
    await create_topic(stack.kafka_bootstrap, name, partitions=3)
    yield name
    await delete_topic(stack.kafka_bootstrap, name)


def problem_code(response: httpx.Response) -> str:
    """The stable code of a problem-details error response (asserting the media type and body shape)."""
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == response.status_code and body["code"] == body["error"]
    return str(body["code"])
