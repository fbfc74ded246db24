"""orphan-scanner on the real stack: a unique `orphan` schema, unique Sense topics, a private MediaMTX.

`Orphan` bundles what a test drives: the service's components built exactly as `serve` and the CLI build
them, a feed that publishes Sense-shaped events to the test's topics, and the projection worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaProducer

from orphan_scanner.domain.classify import ServerPath
from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.entrypoints.main import Components, build
from orphan_scanner.entrypoints.projection_consumer import projection_consumer
from orphan_scanner.service_layer.apply import ApplyResult
from orphan_scanner.service_layer.metrics import ScanTrigger
from orphan_scanner.service_layer.scanner import ScanReport
from orphan_scanner.settings import OrphanScannerSettings
from tests.support.issuers import LocalIssuer
from tests.support.orphan_world import SenseEvents
from tests.support.postgres import migrated_schema_fixture, runtime_pool_fixture
from tests.support.private_mediamtx import PrivateMediaMtx, private_mediamtx
from tests.support.stack import (
    REPO_ROOT,
    MigratedSchema,
    Stack,
    create_topic,
    delete_topic,
    private_file,
    unique_name,
)
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet, MediaMtxApi
from yovision_platform.messaging import AvroSerde, EventRecord, SchemaRegistry, start_producer
from yovision_platform.settings import load_settings

MIGRATIONS = REPO_ROOT / "services/orphan-scanner/src/orphan_scanner/migrations"
TOPIC_PARTITIONS = 3


orphan_schema = migrated_schema_fixture(MIGRATIONS, name="orphan_schema")
orphan_pool = runtime_pool_fixture("orphan_schema", name="orphan_pool", max_size=8)


@pytest.fixture
async def mediamtx(tmp_path: Path) -> AsyncIterator[PrivateMediaMtx]:
    async with private_mediamtx(tmp_path) as server:
        yield server


@pytest.fixture
async def sense_topics(stack: Stack) -> AsyncIterator[tuple[str, str]]:
    tag = uuid.uuid4().hex[:10]
    topics = (f"test.{tag}.device.v1", f"test.{tag}.ownership.v1")
    for name in topics:
        await create_topic(stack.kafka_bootstrap, name, partitions=TOPIC_PARTITIONS)
    yield topics
    for name in topics:
        await delete_topic(stack.kafka_bootstrap, name)


def orphan_settings(
    stack: Stack,
    schema: MigratedSchema,
    mediamtx: PrivateMediaMtx | dict[str, PrivateMediaMtx],
    topics: tuple[str, str],
    work_dir: Path,
    **overrides: object,
) -> OrphanScannerSettings:
    """The service's settings; one private MediaMTX registered in the single-server form (id `default`),
    or several (`{id: server}`) in the fleet form. The issuer is the in-process one's (`LocalIssuer`): the
    harness serves no API; a test that starts `serve` sets its own (the session's Hydra)."""
    dsn_file = work_dir / f"{schema.name}-runtime.dsn"
    if not dsn_file.exists():
        private_file(dsn_file, schema.runtime_dsn + "\n")
    values: dict[str, object] = {
        "database_dsn_file": dsn_file,
        "kafka_bootstrap": stack.kafka_bootstrap,
        **registration(mediamtx),
        "mediamtx_deadline_seconds": 5.0,
        "scan_lease_seconds": 10.0,
        "catch_up_timeout_seconds": 15.0,
        "device_topic": topics[0],
        "ownership_topic": topics[1],
        "consumer_group": unique_name("orphan-projection").replace("_", "-"),
        "outbox_relay_enabled": False,
        "auth_issuer": LocalIssuer.issuer,
    }
    values.update(overrides)
    return load_settings(OrphanScannerSettings, **values)


def names(paths: Iterable[ServerPath], server: str = SINGLE_MEDIA_SERVER_ID) -> set[str]:
    """The path names of `paths`, all of which must be on `server`."""
    listed = list(paths)
    assert {p.media_server_id for p in listed} <= {server}, listed
    return {p.path_name for p in listed}


def registration(mediamtx: PrivateMediaMtx | dict[str, PrivateMediaMtx]) -> dict[str, object]:
    if isinstance(mediamtx, PrivateMediaMtx):
        return {"mediamtx_api_url": mediamtx.url, "mediamtx_credentials_file": mediamtx.credentials_file}
    return {
        "media_servers": {
            server_id: {"api_url": server.url, "credentials_file": str(server.credentials_file)}
            for server_id, server in mediamtx.items()
        }
    }


class SenseFeed(SenseEvents):
    """Publishes Sense-shaped events to the test's topics; sends are batched, `flush` (called by
    `Orphan.caught_up`) waits for the broker's acknowledgements."""

    def __init__(self, producer: AIOKafkaProducer, serde: AvroSerde, topics: tuple[str, str]) -> None:
        super().__init__()
        self._producer = producer
        self.serde = serde
        self._device_topic, self._ownership_topic = topics

    async def deliver(self, event: EventRecord) -> None:
        topic = self._ownership_topic if event.event_type == "PathOwnershipRecorded" else self._device_topic
        await self._producer.send(topic, event.value, key=event.key)

    async def flush(self) -> None:
        """Wait until every event sent so far is acknowledged by the broker."""
        await self._producer.flush()


@dataclass
class Orphan:
    stack: Stack
    settings: OrphanScannerSettings
    schema: MigratedSchema
    pool: asyncpg.Pool
    components: Components
    feed: SenseFeed
    mediamtx: PrivateMediaMtx
    _projection: asyncio.Future[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def start_projection(self) -> None:
        assert self._projection is None
        self._stop = asyncio.Event()
        consumer = projection_consumer(
            self.pool,
            self.schema.name,
            self.components.serde,
            self.components.use_cases.projector,
            consumer_group=self.settings.consumer_group,
        )
        self._projection = asyncio.ensure_future(
            consumer.consume_topics(
                self.settings.kafka,
                self.settings.projection_topics,
                self._stop,
                client_id=f"test-{self.settings.instance_id}",
            )
        )

    async def stop_projection(self) -> None:
        if self._projection is not None:
            self._stop.set()
            await self._projection
            self._projection = None

    async def fresh_report(self) -> ScanReport:
        """`report` as an operator runs it, once the projection has everything published so far."""
        await self.caught_up()
        report = await self.components.use_cases.scanner.scan(ScanTrigger.MANUAL)
        assert report is not None
        return report

    async def apply_report(self, report: ScanReport, *, actor: str = "operator-1") -> ApplyResult:
        """`apply` of `report` with its exact confirmation text."""
        return await self.components.use_cases.applier.apply(
            report.scan_id,
            actor=actor,
            confirmation=confirmation_text(report.scan_id, len(report.classification.owned_stale)),
        )

    async def caught_up(self, timeout_seconds: float = 20.0) -> None:
        await self.feed.flush()
        reason = await self.components.progress.wait(timeout_seconds)
        assert reason is None, reason


@contextlib.asynccontextmanager
async def orphan_harness(
    stack: Stack,
    schema: MigratedSchema,
    pool: asyncpg.Pool,
    mediamtx: PrivateMediaMtx,
    topics: tuple[str, str],
    work_dir: Path,
    *,
    mediamtx_api: MediaMtxApi | None = None,
    fleet: dict[str, PrivateMediaMtx] | None = None,
    **overrides: object,
) -> AsyncIterator[Orphan]:
    """`mediamtx_api`: the client of `mediamtx` to use (a test double wrapping the real one); `fleet`: several
    servers registered instead of `mediamtx` alone."""
    settings = orphan_settings(stack, schema, fleet or mediamtx, topics, work_dir, **overrides)
    api = None if mediamtx_api is None else MediaFleet({SINGLE_MEDIA_SERVER_ID: mediamtx_api})
    components = build(pool, schema.name, settings, client_id="orphan-test", fleet=api)
    producer = await start_producer(stack.kafka_bootstrap, client_id="orphan-test-feed")
    feed = SenseFeed(producer, components.serde, topics)
    orphan = Orphan(stack, settings, schema, pool, components, feed, mediamtx)
    orphan.start_projection()
    try:
        yield orphan
    finally:
        await orphan.stop_projection()
        await producer.stop()
        await components.fleet.aclose()


OrphanFactory = Callable[..., AbstractAsyncContextManager[Orphan]]


@pytest.fixture
def orphan_with(
    stack: Stack,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    mediamtx: PrivateMediaMtx,
    sense_topics: tuple[str, str],
    tmp_path: Path,
) -> OrphanFactory:
    """`orphan_harness` on this test's stack, schema, server and topics; call it with setting overrides."""
    return functools.partial(
        orphan_harness, stack, orphan_schema, orphan_pool, mediamtx, sense_topics, tmp_path
    )


@pytest.fixture
async def orphan(orphan_with: OrphanFactory) -> AsyncIterator[Orphan]:
    async with orphan_with() as harness:
        yield harness


@pytest.fixture(scope="session")
def serde() -> AvroSerde:
    return AvroSerde(SchemaRegistry.load())
