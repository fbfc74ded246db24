"""The renders every property test runs on: the default values (Sense's signed push to Bell off, no TLS),
the production-like values file (the push on, to Bell over HTTPS), and the production values with every
other option on: an explicit relay URL, TLS and a database schema of its own for every service, several
MediaMTX servers, two keys in each key ring, audiences other than the services' names, and Kafka with a
private CA and a client certificate (mTLS) besides SASL."""

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
    # several MediaMTX servers, one with API credentials; a key rotation under way in both key rings
    "mediamtx.servers.mtx-eu-1.apiUrl": "http://mtx-eu-1.media.svc.cluster.local:9997",
    "mediamtx.servers.mtx-eu-1.credentials": "true",
    "mediamtx.servers.mtx-eu-2.apiUrl": "http://mtx-eu-2.media.svc.cluster.local:9997",
    "services.sense-reconciler.settings.SENSE_MEDIA_SERVER_DEFAULT": "mtx-eu-2",
    # audiences of the provider's own naming (Entra ID, Auth0); media-worker's drain hook must ask for its own
    **{f"auth.audiences.{service}": f"api://yovision-{schema}" for service, schema in SCHEMAS.items()},
    "kafka.security.caBundle.configMap": "kafka-ca",
    "kafka.security.clientCertificate.secretName": "yovision-kafka-client",
    **{
        f"services.{service}.{key}": value
        for service, prefix in (("sense-reconciler", "sense"), ("signal-watcher", "signal"))
        for key, value in (
            ("secretsKeyIds", f"{{{prefix}-2026-11,{prefix}-2027-02}}"),
            ("secretsActiveKeyId", f"{prefix}-2027-02"),
        )
    },
}
RENDERS = ("default", "production", "production+options")


def rendered(name: str) -> Manifest:
    if name == "default":
        return render()
    if name == "production":
        return render([PRODUCTION_VALUES])
    return render([PRODUCTION_VALUES], OPTIONS)
