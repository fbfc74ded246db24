from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sense_reconciler.domain import limits
from sense_reconciler.settings import SenseReconcilerSettings
from tests.support.stack import private_file
from tests.unit.sense_reconciler.conftest import ISSUER
from yovision_platform.errors import ConfigError
from yovision_platform.settings import load_settings
from yovision_platform.web import AUDIENCES, AccessTokenSettings

pytestmark = pytest.mark.usefixtures("sense_env")


def refused(**overrides: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(SenseReconcilerSettings, **overrides)
    return caught.value


def test_defaults_follow_the_spec() -> None:
    settings = load_settings(SenseReconcilerSettings)
    assert settings.lease_seconds == 30.0
    assert settings.operation_deadline_seconds == 20.0
    assert settings.consumer_group == "sense-reconciler"
    assert settings.mediamtx_api_url == "http://127.0.0.1:19997"


@pytest.mark.parametrize(("lease", "deadline", "ok"), [(30, 29.9, True), (30, 30, False), (20, 25, False)])
def test_deadline_must_be_strictly_shorter_than_the_lease(lease: float, deadline: float, ok: bool) -> None:
    overrides = {"lease_seconds": lease, "operation_deadline_seconds": deadline}
    if ok:
        load_settings(SenseReconcilerSettings, **overrides)
    else:
        assert "operation_deadline_seconds" in str(refused(**overrides))


@pytest.mark.parametrize(
    ("batch", "ok"), [(1, True), (limits.CLAIM_BATCH_MAX_ITEMS, True), (0, False), (129, False)]
)
def test_claim_batch_is_bounded_by_128(batch: int, ok: bool) -> None:
    if ok:
        assert load_settings(SenseReconcilerSettings, claim_batch=batch).claim_batch == batch
    else:
        assert "SENSE_CLAIM_BATCH" in refused(claim_batch=batch).settings


@pytest.mark.parametrize("url", ["ftp://h/x", "http://user:pw@h:1", "not a url", "http://h/?q=1"])
def test_mediamtx_url_must_be_plain_http(url: str) -> None:
    error = refused(mediamtx_api_url=url)
    assert "SENSE_MEDIAMTX_API_URL" in error.settings
    assert "pw" not in str(error)


def test_instance_id_is_validated() -> None:
    assert load_settings(SenseReconcilerSettings, instance_id="sense-a-1").instance_id == "sense-a-1"
    assert "SENSE_INSTANCE_ID" in refused(instance_id="Bad Id").settings


def test_the_control_api_takes_access_tokens_for_its_own_audience() -> None:
    settings = load_settings(SenseReconcilerSettings)
    assert isinstance(settings, AccessTokenSettings)
    assert SenseReconcilerSettings.audience == "sense-reconciler" and settings.audience in AUDIENCES
    assert settings.token_audience == "sense-reconciler"
    assert settings.auth_issuer == ISSUER
    assert settings.jwks_url == f"{ISSUER}/.well-known/jwks.json"
    assert settings.auth_algorithms == {"RS256", "ES256"}


def test_without_an_issuer_start_up_is_refused_and_no_operator_token_stands_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not {"api_token_file", "api_token"} & set(SenseReconcilerSettings.model_fields)
    monkeypatch.delenv("SENSE_AUTH_ISSUER")
    monkeypatch.setenv("SENSE_API_TOKEN_FILE", str(private_file(tmp_path / "token", "t" * 40 + "\n")))
    assert refused().settings == ("SENSE_AUTH_ISSUER",)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SENSE_AUTH_ISSUER", "http://issuer.example.org"),  # plain http off loopback
        ("SENSE_AUTH_ALGORITHMS", "HS256"),  # a shared secret could mint tokens
        ("SENSE_AUTH_LEEWAY_SECONDS", "61"),
    ],
)
def test_unsafe_token_settings_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    assert name in refused().settings


@pytest.mark.parametrize(
    ("seconds", "ok"),
    [(-0.001, False), (0, True), (600, True), (limits.DRIFT_CHECK_SECONDS_MAX, True), (86_400.001, False)],
)
def test_drift_check_is_off_at_zero_and_bounded_by_a_day(seconds: float, ok: bool) -> None:
    if ok:
        assert (
            load_settings(SenseReconcilerSettings, drift_check_seconds=seconds).drift_check_seconds == seconds
        )
    else:
        assert refused(drift_check_seconds=seconds).settings == ("SENSE_DRIFT_CHECK_SECONDS",)


def test_the_drift_check_defaults_to_ten_minutes() -> None:
    assert (
        load_settings(SenseReconcilerSettings).drift_check_seconds
        == limits.DRIFT_CHECK_SECONDS_DEFAULT
        == 600
    )


def test_without_an_encryption_key_start_up_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SENSE_SECRETS_KEY_FILES")
    error = refused()
    assert error.settings == ("SENSE_SECRETS_KEY_FILES",) and "no_key" in str(error)


def test_the_active_key_encrypts_and_every_key_decrypts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {k: str(private_file(tmp_path / f"{k}.key", os.urandom(32).hex())) for k in ("k1", "k2")}
    monkeypatch.setenv("SENSE_SECRETS_KEY_FILES", json.dumps(files))
    assert "SENSE_SECRETS_ACTIVE_KEY_ID" in refused().settings  # two keys: which one is new?
    ring = load_settings(SenseReconcilerSettings, secrets_active_key_id="k2").key_ring
    assert ring.active_key_id == "k2" and ring.key_ids == {"k1", "k2"}


def test_several_media_servers_need_a_registered_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SENSE_MEDIAMTX_API_URL")
    servers = {"mtx-a": {"api_url": "http://127.0.0.1:1"}, "mtx-b": {"api_url": "http://127.0.0.1:2"}}
    monkeypatch.setenv("SENSE_MEDIA_SERVERS", json.dumps(servers))
    assert refused().settings == ("SENSE_MEDIA_SERVER_DEFAULT",)
    assert refused(media_server_default="mtx-c").settings == ("SENSE_MEDIA_SERVER_DEFAULT",)
    settings = load_settings(SenseReconcilerSettings, media_server_default="mtx-b")
    assert settings.default_media_server == "mtx-b"
    assert [server.id for server in settings.media_server_list] == ["mtx-a", "mtx-b"]


def test_one_server_is_the_default_of_new_sites() -> None:
    settings = load_settings(SenseReconcilerSettings)
    assert settings.default_media_server == "default" and settings.media_server_ids == {"default"}


@pytest.mark.parametrize("name", ["SENSE_AUDIT_PUSH_ENABLED", "SENSE_BELL_RELAY_ENABLED"])
def test_the_audit_push_is_turned_on_by_its_name_or_its_former_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    monkeypatch.setenv(name, "true")
    monkeypatch.setenv("SENSE_BELL_URL", "http://127.0.0.1:18083")
    monkeypatch.setenv("SENSE_BELL_KEY_ID", "sense-1")
    monkeypatch.setenv("SENSE_BELL_KEY_FILE", str(private_file(tmp_path / "bell.key", os.urandom(32).hex())))
    settings = load_settings(SenseReconcilerSettings)
    assert settings.audit_push_enabled
    assert settings.audit_push is not None
