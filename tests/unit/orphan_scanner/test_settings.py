"""OrphanScannerSettings: SPEC bounds, cross-field checks, and errors that never echo values."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from orphan_scanner.domain import limits
from orphan_scanner.settings import OrphanScannerSettings
from tests.support.stack import private_file
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings


@pytest.fixture(autouse=True)
def orphan_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("ORPHAN_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORPHAN_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    monkeypatch.setenv("ORPHAN_MEDIAMTX_API_URL", "http://127.0.0.1:19997/")
    dsn = "postgresql://orphan_app:pw@127.0.0.1:55432/yovision\n"
    monkeypatch.setenv("ORPHAN_DATABASE_DSN_FILE", str(private_file(tmp_path / "dsn", dsn)))
    monkeypatch.setenv("ORPHAN_AUTH_ISSUER", ISSUER)


ISSUER = "http://127.0.0.1:14444"


def refused(**overrides: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(OrphanScannerSettings, **overrides)
    return caught.value


def test_defaults_follow_the_spec() -> None:
    settings = load_settings(OrphanScannerSettings)
    assert settings.scan_interval_seconds == 60.0
    assert settings.scan_lease_seconds == 30.0
    assert settings.mediamtx_deadline_seconds == 20.0
    assert settings.catch_up_timeout_seconds == 30.0
    assert settings.mediamtx_api_url == "http://127.0.0.1:19997"
    assert settings.projection_topics == ("sense.device.v1", "sense.path-ownership.v1")
    assert settings.consumer_group == "orphan-scanner-projection"
    assert settings.scan_enabled is True


def test_env_vars_are_read_with_the_orphan_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORPHAN_SCAN_INTERVAL_SECONDS", "5")
    monkeypatch.setenv("ORPHAN_SCAN_ENABLED", "false")
    settings = load_settings(OrphanScannerSettings)
    assert settings.scan_interval_seconds == 5.0
    assert settings.scan_enabled is False


async def test_the_read_api_takes_the_issuers_access_tokens_for_the_orphan_scanner_audience() -> None:
    settings = load_settings(OrphanScannerSettings)
    async with httpx.AsyncClient() as http:
        verifier = settings.access_token_verifier(http)
    assert (verifier.issuer, verifier.audience) == (ISSUER, "orphan-scanner")
    assert verifier.keys.url == f"{ISSUER}/.well-known/jwks.json"


def test_the_issuer_is_required_as_the_service_and_the_cli_share_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ORPHAN_AUTH_ISSUER")
    assert refused().settings == ("ORPHAN_AUTH_ISSUER",)


def test_mediamtx_url_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORPHAN_MEDIAMTX_API_URL")
    assert "ORPHAN_MEDIAMTX_API_URL" in refused().settings


@pytest.mark.parametrize(
    ("lease", "deadline", "ok"),
    [(30, 29.9, True), (30, 20, True), (30, 30, False), (30, 30.1, False), (20, 25, False), (1, 0.5, True)],
)
def test_mediamtx_deadline_must_be_strictly_shorter_than_the_lease(
    lease: float, deadline: float, ok: bool
) -> None:
    overrides = {"scan_lease_seconds": lease, "mediamtx_deadline_seconds": deadline}
    if ok:
        settings = load_settings(OrphanScannerSettings, **overrides)
        assert settings.mediamtx_deadline_seconds < settings.scan_lease_seconds
    else:
        error = refused(**overrides)
        assert "strictly shorter" in str(error)


def test_deadline_equal_to_the_default_lease_is_refused() -> None:
    refused(mediamtx_deadline_seconds=limits.SCAN_LEASE_SECONDS_DEFAULT)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1:19997",
        "http://user:s3cr3t-pw@127.0.0.1:19997",
        "not a url",
        "http://h/?token=s3cr3t-pw",
        "file:///etc/passwd",
        "http://",
    ],
)
def test_mediamtx_url_must_be_plain_http(url: str) -> None:
    error = refused(mediamtx_api_url=url)
    assert error.settings == ("ORPHAN_MEDIAMTX_API_URL",)
    assert "s3cr3t-pw" not in str(error)
    assert url not in str(error)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9997", "https://mediamtx.internal/", "http://h:1/api/"])
def test_mediamtx_url_accepts_http_and_https(url: str) -> None:
    assert load_settings(OrphanScannerSettings, mediamtx_api_url=url).mediamtx_api_url == url.rstrip("/")


@pytest.mark.parametrize(
    ("interval", "ok"),
    [
        (limits.SCAN_INTERVAL_SECONDS_MIN, True),
        (1, True),
        (0.999, False),
        (0, False),
        (-1, False),
        (86_400, True),
        (86_399.999, True),
        (86_400.001, False),
        (86_401, False),
    ],
)
def test_scan_interval_is_between_1_second_and_1_day(interval: float, ok: bool) -> None:
    assert (limits.SCAN_INTERVAL_SECONDS_MIN, limits.SCAN_INTERVAL_SECONDS_MAX) == (1.0, 86_400.0)
    if ok:
        assert (
            load_settings(OrphanScannerSettings, scan_interval_seconds=interval).scan_interval_seconds
            == interval
        )
    else:
        error = refused(scan_interval_seconds=interval)
        assert error.settings == ("ORPHAN_SCAN_INTERVAL_SECONDS",)


@pytest.mark.parametrize(
    ("timeout", "ok"), [(300, True), (299.9, True), (300.001, False), (301, False), (0, False), (-5, False)]
)
def test_catch_up_timeout_is_at_most_300_seconds(timeout: float, ok: bool) -> None:
    assert limits.CATCH_UP_TIMEOUT_SECONDS_MAX == 300.0
    if ok:
        settings = load_settings(OrphanScannerSettings, catch_up_timeout_seconds=timeout)
        assert settings.catch_up_timeout_seconds == timeout
    else:
        error = refused(catch_up_timeout_seconds=timeout)
        assert error.settings == ("ORPHAN_CATCH_UP_TIMEOUT_SECONDS",)


def test_mediamtx_url_with_a_password_and_no_user_name_is_refused() -> None:
    error = refused(mediamtx_api_url="https://:s3cr3t-pw@127.0.0.1:19997")
    assert error.settings == ("ORPHAN_MEDIAMTX_API_URL",)


def test_out_of_range_numbers_are_not_echoed() -> None:
    error = refused(scan_interval_seconds=86_400.123456, catch_up_timeout_seconds=300.654321)
    assert set(error.settings) == {"ORPHAN_SCAN_INTERVAL_SECONDS", "ORPHAN_CATCH_UP_TIMEOUT_SECONDS"}
    assert "123456" not in str(error)
    assert "654321" not in str(error)


def test_env_var_values_are_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORPHAN_SCAN_INTERVAL_SECONDS", "s3cr3t-interval")
    monkeypatch.setenv("ORPHAN_MEDIAMTX_API_URL", "http://op:s3cr3t-password@127.0.0.1:19997")
    monkeypatch.setenv("ORPHAN_DEVICE_TOPIC", "S3CR3T TOPIC")
    error = refused()
    assert set(error.settings) == {
        "ORPHAN_SCAN_INTERVAL_SECONDS",
        "ORPHAN_MEDIAMTX_API_URL",
        "ORPHAN_DEVICE_TOPIC",
    }
    text = str(error) + repr(error) + " ".join(p.detail for p in error.problems)
    for secret in ("s3cr3t-interval", "s3cr3t-password", "S3CR3T TOPIC", "S3CR3T"):
        assert secret not in text
    assert error.__cause__ is None


@pytest.mark.parametrize("field", ["device_topic", "ownership_topic", "consumer_group"])
@pytest.mark.parametrize(
    ("value", "ok"), [("a", True), ("a" * 200, True), ("a" * 201, False), ("Upper", False)]
)
def test_topic_names_are_validated(field: str, value: str, ok: bool) -> None:
    if ok:
        assert getattr(load_settings(OrphanScannerSettings, **{field: value}), field) == value
    else:
        assert OrphanScannerSettings.env_var_name(field) in refused(**{field: value}).settings


def test_unknown_override_is_refused() -> None:
    refused(force=True)


def test_settings_are_frozen() -> None:
    settings = load_settings(OrphanScannerSettings)
    with pytest.raises(ValueError, match="frozen"):
        settings.scan_interval_seconds = 5


@pytest.mark.parametrize(
    ("seconds", "ok"),
    [(0.999, False), (1, True), (1.001, True), (299.999, True), (300, True), (300.001, False)],
)
def test_metrics_refresh_is_between_1_second_and_5_minutes(seconds: float, ok: bool) -> None:
    if ok:
        settings = load_settings(OrphanScannerSettings, metrics_refresh_seconds=seconds)
        assert settings.metrics_refresh_seconds == seconds
    else:
        assert refused(metrics_refresh_seconds=seconds).settings == ("ORPHAN_METRICS_REFRESH_SECONDS",)


@pytest.mark.parametrize(
    ("hours", "ok"), [(0, False), (1, True), (2, True), (8759, True), (8760, True), (8761, False)]
)
def test_report_retention_is_between_1_hour_and_1_year(hours: int, ok: bool) -> None:
    if ok:
        assert (
            load_settings(OrphanScannerSettings, report_retention_hours=hours).report_retention_hours == hours
        )
    else:
        assert refused(report_retention_hours=hours).settings == ("ORPHAN_REPORT_RETENTION_HOURS",)
