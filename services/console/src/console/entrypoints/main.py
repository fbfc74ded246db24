"""Production wiring of the console: `console serve | migrate | check-config` (no database: `migrate` is a
no-op, so `infra/scripts/services.sh` starts it like any service). `build_console` builds the real adapters
and calls the composition root (`console.bootstrap`)."""

from __future__ import annotations

import asyncio
import sys

import httpx
from prometheus_client import CollectorRegistry

from console.adapters.apis import (
    PROMETHEUS,
    Apis,
    BellReceiverApi,
    MediaWorkerApi,
    OrphanScannerApi,
    PrometheusAlerts,
    SenseReconcilerApi,
    ServiceHealthApi,
    SignalWatcherApi,
)
from console.adapters.jaeger import JaegerQuery
from console.adapters.login_admin import LoginAdmin
from console.adapters.openid import OpenIdProvider, claimed_permissions, origin_of
from console.bootstrap import bootstrap
from console.domain.sign_in import granted_permissions
from console.entrypoints.assets import VENDOR_FILES
from console.entrypoints.dependencies import Console, SignInMetrics
from console.entrypoints.session import Sessions
from console.entrypoints.templating import page_templates
from console.entrypoints.web import install
from console.settings import ConsoleSettings
from yovision_platform.errors import ConfigError
from yovision_platform.web import BodyReadRule, WebContext, WebServiceSpec, guard_policy
from yovision_platform.web import main as run

SERVICE_NAME = "console"
# Upload chunks (at most 20 MiB) are streamed through to media-worker: a minimum rate, not a total bound.
CHUNK_BODY_RULE = BodyReadRule(total_seconds=None, min_bytes_per_second=64 * 1024, grace_seconds=10.0)


def build_console(settings: ConsoleSettings, registry: CollectorRegistry | None = None) -> Console:
    """The console over the real adapters (`registry` takes its metrics)."""
    if not (settings.assets_dir / VENDOR_FILES["htmx.min.js"]).is_file():
        raise ConfigError(settings.env_var_name("assets_dir"), "missing", "htmx not found: run `make setup`")
    urls = settings.service_urls()
    if settings.prometheus_url is not None:
        urls[PROMETHEUS] = settings.prometheus_url
    apis = Apis(urls=urls, timeout_seconds=settings.api_timeout_seconds)
    http = httpx.AsyncClient(timeout=settings.api_timeout_seconds, follow_redirects=False)
    provider = OpenIdProvider(settings.oidc_issuer, settings.oidc_client_id, settings.client_secret, http)
    metrics = SignInMetrics.register(registry if registry is not None else CollectorRegistry())
    mapping = settings.permission_mapping()
    jaeger = JaegerQuery(settings.jaeger_url) if settings.jaeger_url is not None else None
    use_cases = bootstrap(
        settings,
        sense=SenseReconcilerApi(apis),
        orphans=OrphanScannerApi(apis),
        bell=BellReceiverApi(apis),
        watchers=SignalWatcherApi(apis),
        media=MediaWorkerApi(apis),
        health=ServiceHealthApi(apis),
        provider=provider,
        prometheus=PrometheusAlerts(apis) if settings.prometheus_url is not None else None,
        trace_store=jaeger,
        permissions_of=granted_permissions if mapping is None else claimed_permissions(mapping),
        on_refresh=metrics.refreshed,
    )
    login_admin = None
    if settings.dev_login_admin_url is not None:
        login_admin = LoginAdmin(settings.dev_login_admin_url, origin_of(settings.oidc_issuer), http)
    sessions = Sessions(settings.session_key, always_secure=not settings.dev_login)
    console = Console(settings, use_cases, sessions, page_templates(), provider.origins, metrics, login_admin)
    console.closing += [apis.aclose, provider.aclose, http.aclose]
    if jaeger is not None:
        console.closing.append(jaeger.aclose)
    return console


async def configure(ctx: WebContext[ConsoleSettings]) -> None:
    console = build_console(ctx.settings, ctx.registry)
    install(ctx.app, console)
    guard_policy(ctx.app).override("PUT", r"/media/uploads/[^/]+/chunks/[^/]+", body_rule=CHUNK_BODY_RULE)

    async def close_clients(stop: asyncio.Event) -> None:
        await stop.wait()
        await console.aclose()

    ctx.add_worker("api-clients", close_clients)


SPEC = WebServiceSpec(name=SERVICE_NAME, settings_cls=ConsoleSettings, configure=configure)


def main() -> None:
    sys.exit(run(SPEC))
