"""orphan-scanner settings: environment variables prefixed `ORPHAN_`, validated at start-up.

The `sense-orphan` CLI reads the same settings as the service, so an operator runs it with the service's
environment (`make sense-orphan ARGS=...` locally). MediaMTX servers are registered as
`yovision_platform.mediamtx` describes (`ORPHAN_MEDIA_SERVERS`, or the single-server
`ORPHAN_MEDIAMTX_API_URL` + `ORPHAN_MEDIAMTX_CREDENTIALS_FILE`); every one is scanned.

The read API of reports takes the OpenID provider's access tokens (`AccessTokenSettings`: `ORPHAN_AUTH_ISSUER`
is required, the audience is `orphan-scanner`), so the API is always served; the CLI needs the same setting.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from orphan_scanner.domain import limits
from orphan_scanner.domain.projected_events import DEVICE_EVENT_TYPE, OWNERSHIP_EVENT_TYPE
from yovision_platform.mediamtx import MediaServerSettings
from yovision_platform.messaging import default_catalog
from yovision_platform.settings import Port
from yovision_platform.web import AccessTokenSettings

DEFAULT_HTTP_PORT = 18082
AUDIENCE = "orphan-scanner"
CONSUMER_GROUP = "orphan-scanner-projection"
TOPIC_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,199}$"


class OrphanScannerSettings(MediaServerSettings, AccessTokenSettings):
    model_config = SettingsConfigDict(
        env_prefix="ORPHAN_", extra="forbid", frozen=True, hide_input_in_errors=True
    )

    audience: ClassVar[str] = AUDIENCE
    http_port: Port = DEFAULT_HTTP_PORT
    mediamtx_deadline_seconds: float = Field(default=limits.MEDIAMTX_DEADLINE_SECONDS_DEFAULT, gt=0)
    scan_enabled: bool = True
    scan_interval_seconds: float = Field(
        default=limits.SCAN_INTERVAL_SECONDS_DEFAULT,
        ge=limits.SCAN_INTERVAL_SECONDS_MIN,
        le=limits.SCAN_INTERVAL_SECONDS_MAX,
    )
    scan_lease_seconds: float = Field(default=limits.SCAN_LEASE_SECONDS_DEFAULT, gt=0, le=3600)
    report_retention_hours: int = Field(default=limits.REPORT_RETENTION_HOURS_DEFAULT, ge=1, le=24 * 365)
    catch_up_timeout_seconds: float = Field(
        default=limits.CATCH_UP_TIMEOUT_SECONDS_DEFAULT, gt=0, le=limits.CATCH_UP_TIMEOUT_SECONDS_MAX
    )
    metrics_refresh_seconds: float = Field(default=limits.METRICS_REFRESH_SECONDS_DEFAULT, ge=1, le=300)
    projection_enabled: bool = True
    # Logical topic names; unset: the catalogue's topics of Sense's device and ownership events.
    device_topic: str | None = Field(default=None, pattern=TOPIC_PATTERN)
    ownership_topic: str | None = Field(default=None, pattern=TOPIC_PATTERN)
    consumer_group: str = Field(default=CONSUMER_GROUP, pattern=TOPIC_PATTERN)

    @model_validator(mode="after")
    def _deadline_shorter_than_lease(self) -> OrphanScannerSettings:
        if self.mediamtx_deadline_seconds >= self.scan_lease_seconds:
            raise ValueError("mediamtx_deadline_seconds must be strictly shorter than scan_lease_seconds")
        return self

    @property
    def projection_topics(self) -> tuple[str, ...]:
        """The Kafka topics the projection reads (this deployment's names, under ``kafka_prefix``)."""
        catalog = default_catalog()
        return self.kafka_names.topics(
            (
                self.device_topic or catalog.topic_of(DEVICE_EVENT_TYPE),
                self.ownership_topic or catalog.topic_of(OWNERSHIP_EVENT_TYPE),
            )
        )

    @property
    def projection_group(self) -> str:
        """The projection's Kafka consumer group (under ``kafka_prefix``)."""
        return self.kafka_names.group(self.consumer_group)
