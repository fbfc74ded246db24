"""The whole path with Sense's own code: Sense configures MediaMTX and publishes through its outbox relay,
orphan-scanner projects the events, reports and applies. Hand-made paths survive every command, and no
source URI, credential or DSN reaches a report, log line, metric, event or orphan row."""

from __future__ import annotations

import io
import json
import logging
import os
from pathlib import Path
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from orphan_scanner.domain.inputs import confirmation_text
from orphan_scanner.entrypoints.cli import apply_document, report_document
from orphan_scanner.entrypoints.main import build
from orphan_scanner.service_layer.apply import ApplyStatus
from orphan_scanner.service_layer.metrics import OrphanMetrics, ScanTrigger
from sense_reconciler.adapters.mediamtx import MediaMtxClient
from sense_reconciler.adapters.unit_of_work import postgres_units
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.service_layer.devices import Devices
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.reconciler import Reconciler
from sense_reconciler.service_layer.source_uris import SourceUris
from tests.support.kafka import publish_outbox
from tests.support.orphan_scanner_fixtures import TOPIC_PARTITIONS, Orphan, names, orphan_harness
from tests.support.postgres import migrated_schema_fixture
from tests.support.private_mediamtx import HAND_MADE_SOURCE, PrivateMediaMtx
from tests.support.stack import REPO_ROOT, MigratedSchema, Stack
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet
from yovision_platform.messaging import AvroSerde
from yovision_platform.observability import configure_logging, render_latest
from yovision_platform.security import EncryptionKeyRing
from yovision_platform.storage import Identifier

SENSE_MIGRATIONS = REPO_ROOT / "services/sense-reconciler/src/sense_reconciler/migrations"
SENSE_SECRET = "sense-cam-s3cret"
SENSE_SOURCE = f"rtsp://viewer:{SENSE_SECRET}@192.0.2.20:554/live"


# Sense's schema, named apart from the orphan harness's own.
sense_schema = migrated_schema_fixture(SENSE_MIGRATIONS, name="sense_schema", own_name=True)


class Sense:
    """Sense's device service, reconciler and outbox relay, in this process, against the private MediaMTX."""

    def __init__(
        self,
        stack: Stack,
        pool: asyncpg.Pool,
        schema: MigratedSchema,
        serde: AvroSerde,
        orphan: Orphan,
        fleet: dict[str, PrivateMediaMtx] | None = None,
    ):
        """Sense on `orphan`'s MediaMTX (id `default`), or on `fleet` (the first id is the default)."""
        device_topic, ownership_topic = orphan.settings.projection_topics
        servers = fleet or {SINGLE_MEDIA_SERVER_ID: orphan.mediamtx}
        sources = SourceUris(EncryptionKeyRing({"k1": os.urandom(32)}, "k1"))
        units = postgres_units(pool, schema.name)
        self.devices = Devices(
            units,
            serde,
            device_topic=device_topic,
            partitions=TOPIC_PARTITIONS,
            sources=sources,
            media_servers=frozenset(servers),
            default_media_server=next(iter(servers)),
        )
        owned = OwnedPartitions(device_topic)
        owned.assign(range(TOPIC_PARTITIONS))
        self.fleet = MediaFleet(
            {
                server_id: MediaMtxClient(
                    server.url, deadline_seconds=5.0, credentials=server.sandbox.credentials
                )
                for server_id, server in servers.items()
            }
        )
        self.mediamtx = self.fleet.client(next(iter(servers)))
        self.reconciler = Reconciler(
            units,
            self.fleet,
            owned,
            ReconcileMetrics(CollectorRegistry(), self.fleet.ids),
            serde,
            owner="sense-test",
            sources=sources,
            lease_seconds=10.0,
            ownership_topic=ownership_topic,
        )
        self.bootstrap = stack.kafka_bootstrap
        self.pool = pool
        self.schema = schema

    async def create(self, path_name: str, state: DesiredState) -> Any:
        return await self.devices.create_device(
            tenant_id="tenant-a",
            site_id="site-1",
            name=f"camera {path_name}",
            path_name=path_name,
            source_uri=SENSE_SOURCE,
            desired_state=state,
            actor="operator-1",
        )

    async def publish(self, admin: asyncpg.Connection) -> None:
        # Sense's audit facts go to the shared sense.audit.v1 topic; they are not under test here.
        await admin.execute(f"DELETE FROM {self.schema.name.quoted}.outbox WHERE topic = 'sense.audit.v1'")
        await publish_outbox(self.pool, self.schema.name, self.bootstrap, "sense-test")

    async def close(self) -> None:
        await self.fleet.aclose()


async def test_sense_made_paths_are_classified_and_pruned_hand_made_ones_never(
    stack: Stack,
    admin_conn: asyncpg.Connection,
    sense_schema: MigratedSchema,
    orphan_schema: MigratedSchema,
    orphan_pool: asyncpg.Pool,
    mediamtx: PrivateMediaMtx,
    sense_topics: tuple[str, str],
    serde: AvroSerde,
    tmp_path: Path,
) -> None:
    log_stream = io.StringIO()
    handler = configure_logging("orphan-scanner", "test", "DEBUG", stream=log_stream)
    sense_pool = await asyncpg.create_pool(sense_schema.runtime_dsn, min_size=1, max_size=4)
    try:
        async with orphan_harness(
            stack, orphan_schema, orphan_pool, mediamtx, sense_topics, tmp_path
        ) as orphan:
            sense = Sense(stack, sense_pool, sense_schema, serde, orphan)
            try:
                await run_scenario(orphan, sense, admin_conn, log_stream, tmp_path)
            finally:
                await sense.close()
    finally:
        logging.getLogger().removeHandler(handler)
        await sense_pool.close()


async def run_scenario(
    orphan: Orphan, sense: Sense, admin: asyncpg.Connection, log_stream: io.StringIO, tmp_path: Path
) -> None:
    live = [await sense.create(f"live-{i}", DesiredState.ENABLED) for i in range(14)]  # site limit: 16
    retired = [await sense.create(f"retired-{i}", DesiredState.ENABLED) for i in range(2)]
    await sense.reconciler.run_once()
    for device in retired:  # enabled, configured, then disabled; Sense has not removed the path yet
        await sense.devices.set_desired_state(device.id, DesiredState.DISABLED, actor="operator-1")
    hand_made = ["hand-kiosk", "hand-gate", "hand-yard", "lobby/cam-manual"]
    await orphan.mediamtx.add_many(hand_made)
    await sense.publish(admin)
    expected = {d.path_name for d in live + retired} | set(hand_made)
    await orphan.mediamtx.wait_listed(expected)
    all_names = await orphan.mediamtx.names()
    assert all_names == expected and len(all_names) == 20  # 2 candidates of 20: exactly at the 10 % boundary

    await orphan.caught_up()
    registry = CollectorRegistry()
    metrics = OrphanMetrics(registry)
    components = build(orphan.pool, orphan.schema.name, orphan.settings, client_id="e2e", metrics=metrics)
    try:
        report = await components.use_cases.scanner.scan(ScanTrigger.MANUAL)
        assert report is not None
        c = report.classification
        assert names(c.in_use) == {d.path_name for d in live}
        assert names(c.owned_stale) == {d.path_name for d in retired}
        assert {path.path_name: str(device) for path, device in c.owned_stale.items()} == {
            d.path_name: str(d.id) for d in retired
        }
        assert names(c.unowned) == set(hand_made)
        summary = json.dumps(report_document(report))

        result = await components.use_cases.applier.apply(
            report.scan_id, actor="alice", confirmation=confirmation_text(report.scan_id, 2)
        )
        assert result.status is ApplyStatus.COMPLETED
        expected = all_names - {d.path_name for d in retired}
        assert await orphan.mediamtx.settled(expected) == expected
        outcome = json.dumps(apply_document(result))

        rescan = await components.use_cases.scanner.scan(ScanTrigger.MANUAL)
        assert rescan is not None and not rescan.classification.owned_stale
        blocked = await components.use_cases.applier.apply(
            rescan.scan_id, actor="alice", confirmation=confirmation_text(rescan.scan_id, 0)
        )
        assert blocked.status is ApplyStatus.BLOCKED
        assert set(hand_made) <= await orphan.mediamtx.names()
        await components.use_cases.metrics_refresher.refresh()
        metrics_text = render_latest(registry)[0].decode()
        assert 'orphan_last_scan_paths{class="unowned",media_server="default"} 4.0' in metrics_text
        assert "orphan_paths_deleted_total 2.0" in metrics_text
        assert "orphan_apply_blocked_total 1.0" in metrics_text
    finally:
        await components.fleet.aclose()

    events = await decoded_events(orphan, admin)
    assert [e["envelope"]["event_type"] for e in events] == [
        "ScanReported",
        "PathDisposed",
        "PathDisposed",
        "ScanReported",
        "ApplyBlocked",
    ]
    rows = await all_orphan_rows(orphan, admin)
    dsn_secrets = [orphan.schema.runtime_password, orphan.schema.runtime_dsn, "postgresql://"]
    for where, text in {
        "report": summary,
        "apply": outcome,
        "logs": log_stream.getvalue(),
        "metrics": metrics_text,
        "events": json.dumps(events, default=str),
        "rows": rows,
    }.items():
        for secret in [
            SENSE_SECRET,
            SENSE_SOURCE,
            HAND_MADE_SOURCE,
            "hand-made-s3cret",
            "rtsp://",
            *dsn_secrets,
        ]:
            assert secret not in text, f"{where} leaks a secret"
    assert "scan complete" in log_stream.getvalue()  # the logs were captured at all


async def decoded_events(orphan: Orphan, admin: asyncpg.Connection) -> list[dict[str, Any]]:
    rows = await admin.fetch(f"SELECT value FROM {orphan.schema.name.quoted}.outbox ORDER BY id")
    return [dict(orphan.components.serde.decode(bytes(r["value"])).record) for r in rows]


async def all_orphan_rows(orphan: Orphan, admin: asyncpg.Connection) -> str:
    tables = await admin.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", str(orphan.schema.name)
    )
    dumps = []
    for table in tables:
        qualified = f"{orphan.schema.name.quoted}.{Identifier(table['table_name']).quoted}"
        dumps += [
            r["row"] for r in await admin.fetch(f"SELECT row_to_json(t)::text AS row FROM {qualified} t")
        ]
    return "\n".join(dumps)
