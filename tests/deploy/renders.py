"""The renders every property test runs on: the default values (Sense's signed push to Bell off, no TLS),
the production-like values file (the push on, to Bell over HTTPS), and the production values with every
other option on: an explicit relay URL, TLS and a database schema of its own for every service."""

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
    "services.sense-reconciler.bellRelay.url": "https://bell.internal.example.com",
    **{f"services.{service}.databaseSchema": f"prod_{schema}" for service, schema in SCHEMAS.items()},
    **{f"services.{service}.tls.secretName": f"{service}-tls" for service in (*SCHEMAS, "console")},
}
RENDERS = ("default", "production", "production+options")


def rendered(name: str) -> Manifest:
    if name == "default":
        return render()
    if name == "production":
        return render([PRODUCTION_VALUES])
    return render([PRODUCTION_VALUES], OPTIONS)
