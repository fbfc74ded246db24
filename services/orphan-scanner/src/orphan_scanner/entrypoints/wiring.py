"""Builds orphan-scanner's use cases from settings and a pool, for `serve` and the `sense-orphan` CLI."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from orphan_scanner.adapters.projection_store import ProjectionStore
from orphan_scanner.adapters.report_store import ReportStore
from orphan_scanner.service_layer.apply import ApplyService
from orphan_scanner.service_layer.catch_up import ProjectionCatchUp
from orphan_scanner.service_layer.events import OrphanEvents
from orphan_scanner.service_layer.metrics import OrphanMetrics
from orphan_scanner.service_layer.scanner import Scanner
from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.db import Identifier
from yovision_platform.media_servers import MediaFleet, MediaServer
from yovision_platform.mediamtx import MediaMtxApi


@dataclass(frozen=True)
class Components:
    reports: ReportStore
    projection: ProjectionStore
    serde: AvroSerde
    mediamtx: MediaFleet[MediaMtxApi]
    scanner: Scanner
    catch_up: ProjectionCatchUp
    apply: ApplyService


def media_fleet(settings: OrphanScannerSettings) -> MediaFleet[MediaMtxApi]:
    """One client per registered MediaMTX server, each with its own credentials."""

    def client(server: MediaServer) -> MediaMtxApi:
        deadline = settings.mediamtx_deadline_seconds
        return MediaMtxApi(server.api_url, deadline_seconds=deadline, credentials=server.credentials)

    return MediaFleet.connect(settings.media_server_list, client)


def build(
    pool: asyncpg.Pool,
    schema: Identifier,
    settings: OrphanScannerSettings,
    *,
    client_id: str,
    metrics: OrphanMetrics | None = None,
    mediamtx: MediaFleet[MediaMtxApi] | None = None,
) -> Components:
    serde = AvroSerde(SchemaRegistry.load())
    reports = ReportStore(schema)
    projection = ProjectionStore(schema)
    events = OrphanEvents(schema, serde)
    if mediamtx is None:
        mediamtx = media_fleet(settings)
    scanner = Scanner(
        pool,
        reports,
        projection,
        events,
        mediamtx,
        metrics,
        owner=settings.instance_id,
        lease_seconds=settings.scan_lease_seconds,
        interval_seconds=settings.scan_interval_seconds,
        retention_hours=settings.report_retention_hours,
    )
    catch_up = ProjectionCatchUp(
        pool,
        schema,
        kafka=settings.kafka,
        topics=settings.projection_topics,
        consumer_group=settings.projection_group,
        client_id=client_id,
    )
    apply = ApplyService(
        pool,
        reports,
        projection,
        events,
        mediamtx,
        catch_up,
        instance_id=settings.instance_id,
        catch_up_timeout_seconds=settings.catch_up_timeout_seconds,
    )
    return Components(reports, projection, serde, mediamtx, scanner, catch_up, apply)
