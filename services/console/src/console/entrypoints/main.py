"""Composition root of the console: `console serve | migrate | check-config` (no database: `migrate` is a
no-op, so `infra/scripts/services.sh` starts it like any service)."""

from __future__ import annotations

import asyncio
import sys

from console.entrypoints.web import build_console, install
from console.settings import ConsoleSettings
from yovision_platform.guards import BodyReadRule
from yovision_platform.service import WebContext, WebServiceSpec
from yovision_platform.service import main as run
from yovision_platform.web import guard_policy

SERVICE_NAME = "console"
# Upload chunks (at most 20 MiB) are streamed through to media-worker: a minimum rate, not a total bound.
CHUNK_BODY_RULE = BodyReadRule(total_seconds=None, min_bytes_per_second=64 * 1024, grace_seconds=10.0)


async def configure(ctx: WebContext[ConsoleSettings]) -> None:
    settings = ctx.settings
    console = build_console(settings, ctx.registry)
    install(ctx.app, console)
    guard_policy(ctx.app).override("PUT", r"/media/uploads/[^/]+/chunks/[^/]+", body_rule=CHUNK_BODY_RULE)

    async def close_clients(stop: asyncio.Event) -> None:
        await stop.wait()
        await console.aclose()

    ctx.add_worker("api-clients", close_clients)


SPEC = WebServiceSpec(name=SERVICE_NAME, settings_cls=ConsoleSettings, configure=configure)


def main() -> None:
    sys.exit(run(SPEC))
