"""The renders every property test runs on: the default values, the production-like values file, and the
production values with every option on: Sense's signed audit push to Bell (the one optional flow) and a
database schema of its own for every service."""

from __future__ import annotations

from tests.deploy.chart import PRODUCTION_VALUES, Manifest, render

__all__ = ["OPTIONS", "RENDERS", "rendered"]

SCHEMAS = {
    "sense-reconciler": "sense",
    "orphan-scanner": "orphan",
    "bell-receiver": "bell",
    "signal-watcher": "signal",
    "media-worker": "media",
}
OPTIONS = {
    "services.sense-reconciler.bellRelay.enabled": "true",
    "services.sense-reconciler.bellRelay.url": "https://bell-receiver.yovision.svc:18083",
    "services.sense-reconciler.bellRelay.keyId": "relay-2026-11",
    "services.sense-reconciler.bellRelay.caBundle.configMap": "bell-ca",
    **{f"services.{service}.databaseSchema": f"prod_{schema}" for service, schema in SCHEMAS.items()},
}
RENDERS = ("default", "production", "production+options")


def rendered(name: str) -> Manifest:
    if name == "default":
        return render()
    if name == "production":
        return render([PRODUCTION_VALUES])
    return render([PRODUCTION_VALUES], OPTIONS)
