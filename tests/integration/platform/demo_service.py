"""A stand-in service on the shared process shell, for testing the shell itself as a real process.

`python demo_service.py serve|migrate|check-config`, env prefix `DEMO_`; the schema name comes from
YOVISION_TEST_DEMO_SCHEMA so every test run uses its own schema.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic_settings import SettingsConfigDict

from yovision_platform.security import load_key_file
from yovision_platform.settings import BaseServiceSettings, Port
from yovision_platform.web import ServiceContext, ServiceSpec, main


class DemoSettings(BaseServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="DEMO_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = 18099
    signing_key_file: Path | None = None

    def load_secret_files(self) -> None:
        super().load_secret_files()
        if self.signing_key_file is not None:
            load_key_file(self.signing_key_file, self.env_var_name("signing_key_file"))


async def configure(ctx: ServiceContext[DemoSettings]) -> None:
    @ctx.app.get("/v1/ping")
    async def ping() -> dict[str, int]:
        """One database round trip: a request with a server span and a query span when traced."""
        async with ctx.pool.acquire() as conn:
            return {"answer": await conn.fetchval("SELECT 42")}


SPEC = ServiceSpec(
    name="demo-service",
    schema=os.environ.get("YOVISION_TEST_DEMO_SCHEMA", "demo"),
    settings_cls=DemoSettings,
    migrations_dir=Path(__file__).parent / "fixture_migrations",
    configure=configure,
)

if __name__ == "__main__":
    sys.exit(main(SPEC))
