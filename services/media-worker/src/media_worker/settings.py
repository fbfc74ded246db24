"""media-worker settings: environment variables prefixed `MEDIA_`."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from yovision_platform.auth import JwtIdentitySettings
from yovision_platform.settings import Port

DEFAULT_HTTP_PORT = 18085
DEFAULT_STORAGE_DIR = Path(".local/media")
DEFAULT_CAPABILITY_FILE = Path(".local/run/media-worker.capability")
JWT_AUDIENCE = "media-worker"


class MediaWorkerSettings(JwtIdentitySettings):
    model_config = SettingsConfigDict(
        env_prefix="MEDIA_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
    jwt_audience: ClassVar[str] = JWT_AUDIENCE
    storage_dir: Path = DEFAULT_STORAGE_DIR
    capability_file: Path = DEFAULT_CAPABILITY_FILE
    ffmpeg_path: str = Field(default="ffmpeg", min_length=1)
    ffprobe_path: str = Field(default="ffprobe", min_length=1)
    job_lease_seconds: float = Field(default=30.0, ge=3.0, le=600.0)
    rescan_seconds: float = Field(default=60.0, gt=0.0, le=3600.0)
