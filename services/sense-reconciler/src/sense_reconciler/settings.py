"""sense-reconciler settings: environment variables prefixed `SENSE_`."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from yovision_platform.settings import BaseServiceSettings, Port

DEFAULT_HTTP_PORT = 18081


class SenseReconcilerSettings(BaseServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="SENSE_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
