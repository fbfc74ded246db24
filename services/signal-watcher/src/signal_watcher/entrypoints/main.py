"""Composition root of signal-watcher: `signal-watcher serve | migrate | check-config | rotate-keys`.

`serve` wires the API (its callers' access tokens verified against the issuer's JWKS: `use_access_tokens`),
the due-scan scheduler and the retention cleaner onto the shared process shell. The probe client uses the
system resolver and the address guard of `SIGNAL_PROBE_ALLOWED_NETWORKS` (strict when empty, the default) and
`SIGNAL_PROBE_ONLY_NETWORKS` (no confinement when unset, the default); a non-empty allow-list is logged as a
warning at every start, a confinement at INFO.
"""

from __future__ import annotations

import logging
import sys

from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.resolvers import ProbeResolver
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.adapters.watcher_secrets import WatcherSecrets
from signal_watcher.entrypoints.api import ApiDeps, install_api
from signal_watcher.service_layer.checks import CheckRunner
from signal_watcher.service_layer.metrics import SignalMetrics
from signal_watcher.service_layer.retention import RetentionCleaner
from signal_watcher.service_layer.scheduler import Scheduler
from signal_watcher.service_layer.watchers import Watchers
from signal_watcher.settings import SignalWatcherSettings, effective_retention_days
from yovision_platform.access_tokens import use_access_tokens
from yovision_platform.avro import AvroSerde, SchemaRegistry
from yovision_platform.key_rotation import rotate_keys_command
from yovision_platform.service import ServiceContext, ServiceSpec, migrations_dir_of
from yovision_platform.service import main as run

SERVICE_NAME = "signal-watcher"
MIGRATIONS_DIR = migrations_dir_of("signal_watcher")

log = logging.getLogger(__name__)


async def configure(ctx: ServiceContext[SignalWatcherSettings]) -> None:
    settings = ctx.settings
    units_of_work = PostgresUnitsOfWork(ctx.pool, ctx.plan.schema, settings.cipher)
    guard = settings.probe_guard
    if guard.allowed_networks:
        log.warning(
            "SSRF guard loosened: probes may reach these non-public networks",
            extra={"allowed_networks": [str(n) for n in guard.allowed_networks]},
        )
    if guard.is_confined:
        log.info(
            "probes confined: every probed address must lie in these networks",
            extra={"only_networks": [str(n) for n in guard.only_networks]},
        )
    if settings.probe_resolver is ProbeResolver.HOSTS_FILE:
        log.info("probes resolve host names from the hosts file only (no DNS query)")
    probe = ProbeClient(guard=guard, resolver=settings.resolver)
    scheduler: Scheduler | None = None
    if settings.scheduler_enabled:
        metrics = SignalMetrics.create(ctx.registry)
        runner = CheckRunner(units_of_work, probe, AvroSerde(SchemaRegistry.load()), metrics=metrics)
        scheduler = Scheduler(units_of_work, runner, settings.instance_id)
        ctx.add_worker("scheduler", scheduler.run)
    use_access_tokens(ctx)
    install_api(
        ctx.app,
        ApiDeps(
            watchers=Watchers(
                units_of_work,
                probe,
                max_watchers_per_user=settings.max_watchers_per_user,
                check_requested=scheduler.wake if scheduler is not None else lambda: None,
            )
        ),
    )
    cleaner = RetentionCleaner(units_of_work, effective_retention_days(settings.check_retention_days))
    ctx.add_worker("check-retention", cleaner.run)


SPEC = ServiceSpec.for_package(
    SERVICE_NAME,
    package="signal_watcher",
    schema="signal",
    settings_cls=SignalWatcherSettings,
    configure=configure,
    commands={"rotate-keys": rotate_keys_command(WatcherSecrets)},
)


def main() -> None:
    sys.exit(run(SPEC))
