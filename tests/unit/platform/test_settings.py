from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from tests.unit.platform.demo_settings import DB_PASSWORD, GOOD_DSN, DemoSettings, write_secret
from yovision_platform.errors import ConfigError
from yovision_platform.messaging import KafkaNames
from yovision_platform.observability import validate_instance_id
from yovision_platform.security import redact_text
from yovision_platform.settings import (
    SECRET_FILE_MAX_BYTES,
    BaseServiceSettings,
    generate_instance_id,
    is_loopback_host,
    load_settings,
    process_instance_id,
    read_dsn_file,
    read_secret_file,
    renamed_settings_in_use,
    validate_postgres_dsn,
)


def config_error(**overrides: object) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(DemoSettings, **overrides)
    return caught.value


def test_settings_load_with_defaults_and_read_the_runtime_dsn(demo_env: pytest.MonkeyPatch) -> None:
    settings = load_settings(DemoSettings)
    assert settings.http_host == "127.0.0.1"
    assert settings.http_port == 18089
    assert settings.log_level == "INFO"
    assert settings.metrics_enabled is True
    assert settings.migration_dsn_file is None
    assert settings.database_dsn.get_secret_value() == GOOD_DSN
    assert validate_instance_id(settings.instance_id) == settings.instance_id
    assert DB_PASSWORD not in repr(settings)


def test_env_vars_with_the_prefix_override_defaults(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.setenv("DEMO_HTTP_PORT", "19000")
    demo_env.setenv("DEMO_LOG_LEVEL", "debug")
    demo_env.setenv("DEMO_INSTANCE_ID", "demo-7")
    demo_env.setenv("DEMO_METRICS_ENABLED", "false")
    settings = load_settings(DemoSettings)
    assert (settings.http_port, settings.log_level, settings.instance_id) == (19000, "DEBUG", "demo-7")
    assert settings.metrics_enabled is False


def test_loaded_dsn_is_registered_for_log_redaction(demo_env: pytest.MonkeyPatch) -> None:
    load_settings(DemoSettings)
    assert DB_PASSWORD not in redact_text(f"oops the password is {DB_PASSWORD}")


def test_missing_required_settings_are_each_named(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.delenv("DEMO_KAFKA_BOOTSTRAP")
    demo_env.delenv("DEMO_DATABASE_DSN_FILE")
    error = config_error()
    assert set(error.settings) == {"DEMO_KAFKA_BOOTSTRAP", "DEMO_DATABASE_DSN_FILE"}
    assert all(problem.reason == "missing" for problem in error.problems)
    assert error.code == "config_invalid"


@pytest.mark.parametrize(
    ("env_var", "value"),
    [
        ("DEMO_HTTP_PORT", "99999-secret-ish"),
        ("DEMO_HTTP_PORT", "70000"),
        ("DEMO_KAFKA_BOOTSTRAP", "kafka-secret-host"),
        ("DEMO_INSTANCE_ID", "Bad_Instance_Secretish"),
        ("DEMO_LOG_LEVEL", "loud-secretish"),
        ("DEMO_HTTP_HOST", "user:pw-secretish@host"),
        ("DEMO_METRICS_ENABLED", "perhaps-secretish"),
    ],
)
def test_invalid_values_name_the_env_var_and_never_echo_the_value(
    demo_env: pytest.MonkeyPatch, env_var: str, value: str
) -> None:
    demo_env.setenv(env_var, value)
    error = config_error()
    assert error.settings == (env_var,)
    assert value not in str(error)
    assert error.__cause__ is None
    assert error.__suppress_context__


def test_unknown_init_overrides_are_refused_by_name(demo_env: pytest.MonkeyPatch) -> None:
    error = config_error(databse_dsn_file="/x")
    assert error.settings == ("DATABSE_DSN_FILE",)
    assert error.problems[0].reason == "extra_forbidden"


def test_base_class_without_prefix_cannot_be_loaded() -> None:
    with pytest.raises(TypeError, match="env_prefix"):
        load_settings(BaseServiceSettings)


def test_missing_dsn_file_names_the_setting(demo_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    demo_env.setenv("DEMO_DATABASE_DSN_FILE", str(tmp_path / "absent.dsn"))
    error = config_error()
    assert error.settings == ("DEMO_DATABASE_DSN_FILE",)
    assert error.problems[0].reason == "missing"


def test_dsn_pasted_into_the_file_setting_is_not_echoed(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.setenv("DEMO_DATABASE_DSN_FILE", GOOD_DSN)
    error = config_error()
    assert error.settings == ("DEMO_DATABASE_DSN_FILE",)
    assert DB_PASSWORD not in str(error)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (f"mysql://u:{DB_PASSWORD}@h/db", "dsn_scheme"),
        (f"postgresql://u:{DB_PASSWORD}@/db", "dsn_missing_host"),
        (f"postgresql://u:{DB_PASSWORD}@h", "dsn_missing_database"),
        (f"postgresql://u:{DB_PASSWORD}@h:notaport/db", "dsn_malformed"),
        (f"postgresql://u:{DB_PASSWORD}@h:5432/db extra", "dsn_malformed"),
        (f"host=h password={DB_PASSWORD} dbname=x", "dsn_malformed"),
    ],
)
def test_malformed_dsn_names_the_setting_and_never_the_value(
    demo_env: pytest.MonkeyPatch, tmp_path: Path, content: str, reason: str
) -> None:
    demo_env.setenv("DEMO_DATABASE_DSN_FILE", str(write_secret(tmp_path / "bad.dsn", content)))
    error = config_error()
    assert error.settings == ("DEMO_DATABASE_DSN_FILE",)
    assert error.problems[0].reason == reason
    assert DB_PASSWORD not in str(error)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgres://u@db.internal/yovision",
        "postgresql://u:p@127.0.0.1:55432/yovision?sslmode=require",
        "postgresql:///yovision?host=/var/run/postgresql",
        "postgresql://h/?dbname=yovision",
    ],
)
def test_valid_dsn_shapes_are_accepted(dsn: str) -> None:
    assert validate_postgres_dsn(f" {dsn}\n", "X_DSN") == dsn


def test_migration_dsn_is_optional_until_asked_for(demo_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = load_settings(DemoSettings)
    with pytest.raises(ConfigError) as caught:
        settings.read_migration_dsn()
    assert caught.value.settings == ("DEMO_MIGRATION_DSN_FILE",)
    owner_dsn = "postgresql://owner:owner-pw-1@127.0.0.1:55432/yovision"
    demo_env.setenv("DEMO_MIGRATION_DSN_FILE", str(write_secret(tmp_path / "owner.dsn", owner_dsn)))
    assert load_settings(DemoSettings).read_migration_dsn().get_secret_value() == owner_dsn


def test_secret_file_shorter_than_the_minimum_is_refused(tmp_path: Path) -> None:
    path = write_secret(tmp_path / "short.key", "0123456789abcdef\n")
    with pytest.raises(ConfigError) as caught:
        read_secret_file(path, "DEMO_HMAC_KEY_FILE", min_bytes=32)
    assert caught.value.settings == ("DEMO_HMAC_KEY_FILE",)
    assert caught.value.problems[0].reason == "too_short"
    assert "0123456789abcdef" not in str(caught.value)


def test_secret_file_strips_exactly_one_trailing_newline(tmp_path: Path) -> None:
    assert read_secret_file(write_secret(tmp_path / "a", "abc\n"), "S").get_secret_value() == "abc"
    assert read_secret_file(write_secret(tmp_path / "b", "abc\r\n"), "S").get_secret_value() == "abc"
    assert read_secret_file(write_secret(tmp_path / "c", "abc\n\n"), "S").get_secret_value() == "abc\n"


@pytest.mark.parametrize(("mode", "accepted"), [(0o600, True), (0o640, True), (0o604, False), (0o602, False)])
def test_secret_files_accessible_to_others_are_refused(tmp_path: Path, mode: int, accepted: bool) -> None:
    path = write_secret(tmp_path / "secret", "value-123", mode=mode)
    if accepted:
        assert read_secret_file(path, "S").get_secret_value() == "value-123"
    else:
        with pytest.raises(ConfigError) as caught:
            read_secret_file(path, "S")
        assert caught.value.problems[0].reason == "world_accessible"


def test_secret_file_problems_have_stable_reasons(tmp_path: Path) -> None:
    cases = {
        "missing": tmp_path / "absent",
        "not_a_file": tmp_path,
        "too_large": write_secret(tmp_path / "big", "x" * (SECRET_FILE_MAX_BYTES + 1)),
        "not_utf8": tmp_path / "latin1",
    }
    cases["not_utf8"].write_bytes(b"\xff\xfe secret")
    os.chmod(cases["not_utf8"], 0o600)
    for reason, path in cases.items():
        with pytest.raises(ConfigError) as caught:
            read_secret_file(path, "S")
        assert caught.value.problems[0].reason == reason, reason


def test_read_dsn_file_validates_the_content(tmp_path: Path) -> None:
    path = write_secret(tmp_path / "dsn", "postgresql://u:p@h/db\n")
    assert read_dsn_file(path, "S").get_secret_value() == "postgresql://u:p@h/db"


def test_generated_instance_ids_are_valid_and_distinct() -> None:
    for hostname in ("Bell-Receiver-7f9c.internal.example", "", "___", "x" * 200, "ÜNICODE-host"):
        instance_id = generate_instance_id(hostname)
        assert validate_instance_id(instance_id) == instance_id
    assert generate_instance_id("pod-1") != generate_instance_id("pod-1")
    assert generate_instance_id("Bell-Receiver-7f9c.internal").startswith("bell-receiver-7f9c-")


def test_process_instance_id_is_stable_within_the_process() -> None:
    assert process_instance_id() == process_instance_id()


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError) as caught:
        read_secret_file(fifo, "S")
    assert caught.value.problems[0].reason == "not_a_file"


# Deployment names: the schema and the Kafka prefix settings, and the physical Kafka names they give.
PREFIX_AT_LIMIT = "e" + "2" * 62  # 63 characters


def test_by_default_the_names_are_the_logical_ones(demo_env: pytest.MonkeyPatch) -> None:
    settings = load_settings(DemoSettings)
    assert settings.database_schema is None and settings.kafka_prefix == ""
    assert settings.kafka_names.topic("sense.device.v1") == "sense.device.v1"
    assert settings.kafka_names.group("sense-reconciler") == "sense-reconciler"


def test_the_prefix_goes_in_front_of_every_topic_and_group(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.setenv("DEMO_KAFKA_PREFIX", "e2e-1a2b.")
    names = load_settings(DemoSettings).kafka_names
    assert names.topic("sense.device.v1") == "e2e-1a2b.sense.device.v1"
    assert names.topics(("a.v1", "b.v1")) == ("e2e-1a2b.a.v1", "e2e-1a2b.b.v1")
    assert names.group("bell-receiver-audit") == "e2e-1a2b.bell-receiver-audit"
    assert names.logical_topic("e2e-1a2b.sense.device.v1") == "sense.device.v1"
    with pytest.raises(ValueError, match="prefix"):
        names.logical_topic("other.sense.device.v1")


@pytest.mark.parametrize(
    ("prefix", "accepted"),
    [
        ("", True),
        ("a", True),
        (PREFIX_AT_LIMIT, True),
        (PREFIX_AT_LIMIT + "x", False),
        ("Staging.", False),
        (".staging", False),
        ("stag ing", False),
        ("stag/ing", False),
    ],
)
def test_the_kafka_prefix_is_validated(demo_env: pytest.MonkeyPatch, prefix: str, accepted: bool) -> None:
    demo_env.setenv("DEMO_KAFKA_PREFIX", prefix)
    if accepted:
        assert load_settings(DemoSettings).kafka_prefix == prefix
        assert KafkaNames(prefix).prefix == prefix
    else:
        error = config_error()
        assert "DEMO_KAFKA_PREFIX" in str(error) and prefix not in str(error).replace("DEMO_KAFKA_PREFIX", "")
        with pytest.raises(ValueError, match="prefix"):
            KafkaNames(prefix)


@pytest.mark.parametrize(
    ("schema", "accepted"),
    [
        ("sense", True),
        ("e2e_1a2b_sense", True),
        ("s" * 63, True),
        ("s" * 64, False),
        ("Sense", False),
        ("1sense", False),
        ("sense-x", False),
        ('sense"; drop', False),
    ],
)
def test_the_database_schema_is_an_identifier(
    demo_env: pytest.MonkeyPatch, schema: str, accepted: bool
) -> None:
    demo_env.setenv("DEMO_DATABASE_SCHEMA", schema)
    if accepted:
        assert load_settings(DemoSettings).database_schema == schema
    else:
        assert "DEMO_DATABASE_SCHEMA" in str(config_error())


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("LOCALHOST", True),
        ("127.0.0.1", True),
        ("127.255.255.254", True),
        ("::1", True),
        ("128.0.0.1", False),
        ("localhost.example.org", False),
        ("10.0.0.1", False),
        ("", False),
        (None, False),
    ],
)
def test_plain_http_is_for_loopback_hosts_only(host: str | None, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


class RenamedDemoSettings(DemoSettings):
    renamed_settings: ClassVar[Mapping[str, str]] = {"DEMO_OLD_LOG_LEVEL": "DEMO_LOG_LEVEL"}


def test_a_renamed_setting_is_read_by_its_former_name(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.setenv("DEMO_OLD_LOG_LEVEL", "DEBUG")
    assert load_settings(RenamedDemoSettings).log_level == "DEBUG"
    assert renamed_settings_in_use(RenamedDemoSettings) == ["DEMO_OLD_LOG_LEVEL"]


def test_the_new_name_wins_when_both_agree_and_neither_is_in_use_without_the_former(
    demo_env: pytest.MonkeyPatch,
) -> None:
    demo_env.setenv("DEMO_LOG_LEVEL", "WARNING")
    assert load_settings(RenamedDemoSettings).log_level == "WARNING"
    assert renamed_settings_in_use(RenamedDemoSettings) == []
    demo_env.setenv("DEMO_OLD_LOG_LEVEL", "WARNING")
    assert load_settings(RenamedDemoSettings).log_level == "WARNING"


def test_a_setting_given_by_both_names_with_different_values_is_refused(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.setenv("DEMO_LOG_LEVEL", "WARNING")
    demo_env.setenv("DEMO_OLD_LOG_LEVEL", "DEBUG")
    with pytest.raises(ConfigError) as refused:
        load_settings(RenamedDemoSettings)
    assert [(p.setting, p.reason) for p in refused.value.problems] == [
        ("DEMO_LOG_LEVEL", "renamed_setting_conflict")
    ]
    assert "DEBUG" not in str(refused.value) and "WARNING" not in str(refused.value)


def test_a_former_name_means_nothing_to_a_class_that_did_not_rename_it(demo_env: pytest.MonkeyPatch) -> None:
    demo_env.setenv("DEMO_OLD_LOG_LEVEL", "DEBUG")
    assert load_settings(DemoSettings).log_level == "INFO"
