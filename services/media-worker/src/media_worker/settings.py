"""media-worker settings: environment variables prefixed `MEDIA_`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from yovision_platform.auth import TokenVerifier
from yovision_platform.settings import BaseServiceSettings, Port

DEFAULT_HTTP_PORT = 18085
DEFAULT_STORAGE_DIR = Path(".local/media")
DEFAULT_CAPABILITY_FILE = Path(".local/run/media-worker.capability")
JWT_AUDIENCE = "media-worker"


class MediaWorkerSettings(BaseServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEDIA_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
    auth_jwt_key_file: Path
    auth_jwt_issuer: str = Field(min_length=1)
    storage_dir: Path = DEFAULT_STORAGE_DIR
    capability_file: Path = DEFAULT_CAPABILITY_FILE
    ffmpeg_path: str = Field(default="ffmpeg", min_length=1)
    ffprobe_path: str = Field(default="ffprobe", min_length=1)
    job_lease_seconds: float = Field(default=30.0, ge=3.0, le=600.0)
    rescan_seconds: float = Field(default=60.0, gt=0.0, le=3600.0)

    def load_secret_files(self) -> None:
        super().load_secret_files()
        self.token_verifier()

    def token_verifier(self) -> TokenVerifier:
        return TokenVerifier.from_key_file(
            self.auth_jwt_key_file,
            self.env_var_name("auth_jwt_key_file"),
            issuer=self.auth_jwt_issuer,
            audience=JWT_AUDIENCE,
        )
