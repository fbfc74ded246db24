"""media-worker settings: environment variables prefixed `MEDIA_`.

Upload bodies (the plain multipart POST and each chunk PUT) have no fixed total read deadline, since a 20 MiB
chunk over a slow link may take minutes; instead they must keep up a minimum rate: byte *n* must have
arrived by ``request start + MEDIA_UPLOAD_READ_GRACE_SECONDS + n / MEDIA_UPLOAD_MIN_BYTES_PER_SECOND``
(defaults 10 s and 16 KiB/s, i.e. a 128 kbit/s link; a full 20 MiB chunk may take up to ~21 min). A body
that falls behind is answered 408 `request_timeout`. Every other body has the platform's 10 s total.

The API takes the access tokens of the OpenID provider ``MEDIA_AUTH_ISSUER`` (verified against its JWKS;
audience ``media-worker``); the other ``MEDIA_AUTH_*`` settings are those of
`yovision_platform.web.AccessTokenSettings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from yovision_platform.settings import Port
from yovision_platform.web import AccessTokenSettings, BodyReadRule

DEFAULT_HTTP_PORT = 18085
DEFAULT_STORAGE_DIR = Path(".local/media")
DEFAULT_CAPABILITY_FILE = Path(".local/run/media-worker.capability")
AUDIENCE = "media-worker"
DEFAULT_UPLOAD_MIN_BYTES_PER_SECOND = 16 * 1024
DEFAULT_UPLOAD_READ_GRACE_SECONDS = 10.0


class MediaWorkerSettings(AccessTokenSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEDIA_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    http_port: Port = DEFAULT_HTTP_PORT
    audience: ClassVar[str] = AUDIENCE
    storage_dir: Path = DEFAULT_STORAGE_DIR
    capability_file: Path = DEFAULT_CAPABILITY_FILE
    ffmpeg_path: str = Field(default="ffmpeg", min_length=1)
    ffprobe_path: str = Field(default="ffprobe", min_length=1)
    job_lease_seconds: float = Field(default=30.0, ge=3.0, le=600.0)
    rescan_seconds: float = Field(default=60.0, gt=0.0, le=3600.0)
    upload_min_bytes_per_second: int = Field(default=DEFAULT_UPLOAD_MIN_BYTES_PER_SECOND, ge=1024, le=1024**3)
    upload_read_grace_seconds: float = Field(default=DEFAULT_UPLOAD_READ_GRACE_SECONDS, ge=1.0, le=300.0)

    @property
    def upload_body_rule(self) -> BodyReadRule:
        return BodyReadRule(
            total_seconds=None,
            min_bytes_per_second=self.upload_min_bytes_per_second,
            grace_seconds=self.upload_read_grace_seconds,
        )
