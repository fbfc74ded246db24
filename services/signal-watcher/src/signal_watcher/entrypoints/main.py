"""Composition root of signal-watcher: `signal-watcher serve | migrate | check-config | rotate-keys`.

`serve` wires the API (its callers' access tokens verified against the issuer's JWKS: `use_access_tokens`),
the due-scan scheduler and the retention cleaner onto the shared process shell. The probe client uses the
system resolver and the address guard of `SIGNAL_PROBE_ALLOWED_NETWORKS` (strict when empty, the default) and
`SIGNAL_PROBE_ONLY_NETWORKS` (no confinement when unset, the default); a non-empty allow-list is logged as a
warning at every start, a confinement at INFO.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys

from signal_watcher.adapters.crypto import SecretCipher
from signal_watcher.adapters.probe_client import ProbeClient
from signal_watcher.adapters.resolvers import resolver_of
from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.adapters.watcher_secrets import WatcherSecrets
from signal_watcher.bootstrap import bootstrap
from signal_watcher.domain.probes import ProbeResolver
from signal_watcher.entrypoints.api import include_api
from signal_watcher.entrypoints.retention_worker import run_check_retention
from signal_watcher.entrypoints.scheduler_worker import Scheduler
from signal_watcher.service_layer.metrics import SignalMetrics
from signal_watcher.settings import SignalWatcherSettings
from yovision_platform.messaging import AvroSerde, SchemaRegistry
from yovision_platform.security import rotate_keys_command
from yovision_platform.web import ServiceContext, ServiceSpec, migrations_dir_of, use_access_tokens
from yovision_platform.web import main as run

SERVICE_NAME = "signal-watcher"
MIGRATIONS_DIR = migrations_dir_of("signal_watcher")

log = logging.getLogger(__name__)


async def configure(ctx: ServiceContext[SignalWatcherSettings]) -> None:
    settings = ctx.settings
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
    scheduler_woken = asyncio.Event()
    use_cases = bootstrap(
        settings,
        units_of_work=PostgresUnitsOfWork(ctx.pool, ctx.plan.schema, SecretCipher(settings.key_ring)),
        probe=ProbeClient(
            guard=guard, resolver=resolver_of(settings.probe_resolver, settings.probe_hosts_file)
        ),
        serde=AvroSerde(SchemaRegistry.load()),
        metrics=SignalMetrics.create(ctx.registry) if settings.scheduler_enabled else None,
        check_requested=scheduler_woken.set if settings.scheduler_enabled else lambda: None,
    )
    if settings.scheduler_enabled:
        scheduler = Scheduler(use_cases.check_runner, settings.instance_id, woken=scheduler_woken)
        ctx.add_worker("scheduler", scheduler.run)
    use_access_tokens(ctx)
    include_api(ctx.app, use_cases)
    ctx.add_worker("check-retention", functools.partial(run_check_retention, use_cases.retention))


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
