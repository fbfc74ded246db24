"""The composition root on the fakes: the use cases `bootstrap` builds from the settings and the ports it is
given, wired as `serve` wires them."""

from __future__ import annotations

import secrets

import pytest
from prometheus_client import CollectorRegistry

from sense_reconciler.adapters.memory import MemoryBell, MemoryMediaMtx, MemorySense
from sense_reconciler.bootstrap import AuditPushPorts, bootstrap
from sense_reconciler.domain.audit_push import AuditPushConfig
from sense_reconciler.domain.model import DesiredState
from sense_reconciler.service_layer.metrics import ReconcileMetrics
from sense_reconciler.service_layer.ownership import OwnedPartitions
from sense_reconciler.service_layer.source_uris import SourceUris
from sense_reconciler.settings import SenseReconcilerSettings
from tests.support.sense_devices import DEVICE_TOPIC
from yovision_platform.mediamtx import SINGLE_MEDIA_SERVER_ID, MediaFleet
from yovision_platform.messaging import AvroSerde
from yovision_platform.security import KeyRing, SigningKey
from yovision_platform.settings import load_settings

pytestmark = pytest.mark.usefixtures("sense_env")

PUSH = AuditPushConfig(
    "https://bell.internal",
    KeyRing([SigningKey("sense-1", secrets.token_bytes(32))], active_key_id="sense-1"),
    lease_seconds=3.0,
    request_deadline_seconds=1.0,
)


async def test_without_a_fleet_or_an_audit_push_only_the_api_use_cases_exist_and_a_change_wakes_the_writers(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris
) -> None:
    owned = OwnedPartitions(DEVICE_TOPIC)
    owned.assign(range(10_000))
    use_cases = bootstrap(
        load_settings(SenseReconcilerSettings), units=sense.units(), serde=serde, sources=sources, owned=owned
    )
    assert (use_cases.reconciler, use_cases.audit_pusher) == (None, None)
    assert use_cases.sites is use_cases.devices.sites
    woken = owned.new_signal()
    device = await use_cases.devices.create_device(
        tenant_id="tenant-a",
        site_id="site-1",
        name="Lobby",
        path_name="lobby",
        source_uri="rtsp://cam.example/stream",
        desired_state=DesiredState.ENABLED,
        actor="alice",
    )
    assert device.media_server_id == SINGLE_MEDIA_SERVER_ID
    assert woken.is_set()


async def test_the_reconciler_and_the_audit_pusher_take_the_settings_and_the_given_ports(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris
) -> None:
    settings = load_settings(SenseReconcilerSettings, claim_batch=7, scan_interval_seconds=2.5)
    fleet = MediaFleet({SINGLE_MEDIA_SERVER_ID: MemoryMediaMtx()})
    use_cases = bootstrap(
        settings,
        units=sense.units(),
        serde=serde,
        sources=sources,
        owned=OwnedPartitions(DEVICE_TOPIC),
        fleet=fleet,
        reconcile_metrics=ReconcileMetrics(CollectorRegistry(), fleet.ids),
        audit_push=AuditPushPorts(sense.audit_push_store("sense-a", lease_seconds=3.0), MemoryBell()),
        audit_push_config=PUSH,
    )
    reconciler, pusher = use_cases.reconciler, use_cases.audit_pusher
    assert reconciler is not None and pusher is not None
    assert (reconciler.media_servers, reconciler.batch, reconciler.scan_interval_seconds) == (
        (SINGLE_MEDIA_SERVER_ID,),
        7,
        2.5,
    )
    assert pusher.config is PUSH
    assert (await pusher.run_once()).claimed == 0  # no fact yet


def test_a_reconciler_without_its_metrics_is_refused(
    sense: MemorySense, serde: AvroSerde, sources: SourceUris
) -> None:
    with pytest.raises(ValueError, match="metrics"):
        bootstrap(
            load_settings(SenseReconcilerSettings),
            units=sense.units(),
            serde=serde,
            sources=sources,
            owned=OwnedPartitions(DEVICE_TOPIC),
            fleet=MediaFleet({SINGLE_MEDIA_SERVER_ID: MemoryMediaMtx()}),
        )
