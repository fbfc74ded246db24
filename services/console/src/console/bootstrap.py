"""The console's composition root (cosmicpython's `bootstrap`): the ports' implementations and the settings
in, the console's use cases out. Production (`console.entrypoints.main`) passes the real adapters; tests and
benches pass the fakes of `console.adapters.memory`. Nothing else constructs the use cases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from console.domain.sign_in import TokenAnswer, granted_permissions
from console.service_layer.overview import Overview
from console.service_layer.ports import (
    AlertsPort,
    BellReceiverPort,
    HealthPort,
    MediaWorkerPort,
    OrphanScannerPort,
    Provider,
    SenseReconcilerPort,
    SignalWatcherPort,
    TraceStore,
)
from console.service_layer.sign_in import RefreshOutcome, SignIns
from console.service_layer.traces import Traces
from console.settings import ConsoleSettings
from yovision_platform.web import PERMISSIONS


@dataclass(frozen=True)
class ConsoleUseCases:
    """What the pages call: the five services' ports (the pages render their answers), the overview, the
    traces (None without a trace store) and the sign-ins."""

    sense: SenseReconcilerPort
    orphans: OrphanScannerPort
    bell: BellReceiverPort
    watchers: SignalWatcherPort
    media: MediaWorkerPort
    overview: Overview
    traces: Traces | None
    sign_ins: SignIns


def bootstrap(
    settings: ConsoleSettings,
    *,
    sense: SenseReconcilerPort,
    orphans: OrphanScannerPort,
    bell: BellReceiverPort,
    watchers: SignalWatcherPort,
    media: MediaWorkerPort,
    health: HealthPort,
    provider: Provider,
    prometheus: AlertsPort | None = None,
    trace_store: TraceStore | None = None,
    permissions_of: Callable[[TokenAnswer], frozenset[str] | None] = granted_permissions,
    on_refresh: Callable[[RefreshOutcome], None] = lambda outcome: None,
) -> ConsoleUseCases:
    sign_ins = SignIns(
        provider,
        scopes=PERMISSIONS,
        audiences=settings.oidc_audiences,
        refresh_margin_seconds=settings.refresh_margin_seconds,
        permissions_of=permissions_of,
        on_refresh=on_refresh,
    )
    return ConsoleUseCases(
        sense=sense,
        orphans=orphans,
        bell=bell,
        watchers=watchers,
        media=media,
        overview=Overview(health, prometheus),
        traces=Traces(trace_store) if trace_store is not None else None,
        sign_ins=sign_ins,
    )
