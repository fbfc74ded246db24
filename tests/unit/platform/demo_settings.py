"""A minimal service settings class (prefix ``DEMO_``) and secret-file helper for the settings unit tests."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic_settings import SettingsConfigDict

from yovision_platform.settings import BaseServiceSettings, Port

DB_PASSWORD = "settings-test-pw-4711"
GOOD_DSN = f"postgresql://sense_rt:{DB_PASSWORD}@127.0.0.1:55432/yovision"
DEMO_BOOTSTRAP = "127.0.0.1:19092"


class DemoSettings(BaseServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DEMO_")

    http_port: Port = 18089


def write_secret(path: Path, content: str, mode: int = 0o600) -> Path:
    path.write_text(content, encoding="utf-8")
    os.chmod(path, mode)
    return path
