from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from tests.support.stack import REPO_ROOT
from yovision_platform.localstack import read_env_file
from yovision_platform.tools import identity_provider
from yovision_platform.tools.devsecrets import LOCAL_SERVICES, STACK_PROMETHEUS_URL, Environment, generate
from yovision_platform.web import AUDIENCES


def make_stack(tmp_path: Path) -> Path:
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    admin = secrets_dir / "pg-admin.dsn"
    admin.write_text("postgresql://postgres:admin-secret@127.0.0.1:55432/yovision\n")
    (tmp_path / "stack.env").write_text(
        f"YOVISION_PG_ADMIN_DSN_FILE={admin}\nYOVISION_KAFKA_BOOTSTRAP=127.0.0.1:19092\n"
    )
    return tmp_path


def test_env_files_name_secret_files_and_hold_no_secret(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local)
    for service in LOCAL_SERVICES:
        env_text = (local / "env" / f"{service.name}.env").read_text()
        assert "admin-secret" not in env_text and "postgresql://" not in env_text
        assert "MIGRATION_DSN_FILE" not in env_text, "serve must never be handed the admin DSN"
        if service.schema is None:  # the console: no database, nothing to migrate
            assert "DATABASE_DSN_FILE" not in env_text
            assert not (local / "env" / f"{service.name}.migrate.env").exists()
            continue
        migrate_text = (local / "env" / f"{service.name}.migrate.env").read_text()
        assert migrate_text.startswith(f"{service.env_prefix}MIGRATION_DSN_FILE=")
        dsn = local / "secrets" / f"{service.schema}-runtime.dsn"
        assert dsn.read_text().startswith(f"postgresql://{service.schema}_app:")
        assert stat.S_IMODE(dsn.stat().st_mode) == 0o600


def test_regenerating_keeps_existing_passwords(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local)
    before = {p.name: p.read_text() for p in (local / "secrets").glob("*-runtime.dsn")}
    generate(local)
    after = {p.name: p.read_text() for p in (local / "secrets").glob("*-runtime.dsn")}
    assert before == after and len(before) == len([s for s in LOCAL_SERVICES if s.schema])


def test_service_specific_secrets_are_generated_once_and_shared_where_needed(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local)
    sense_env = (local / "env" / "sense-reconciler.env").read_text()
    bell_env = (local / "env" / "bell-receiver.env").read_text()
    relay_key = local / "secrets" / "bell-relay-dev-1.key"
    assert f"SENSE_BELL_KEY_FILE={relay_key}" in sense_env
    assert f"""BELL_AUDIT_PUSH_KEY_FILES='{{"relay-dev-1":"{relay_key}"}}'""" in bell_env
    assert len(bytes.fromhex(relay_key.read_text().strip())) == 32
    before = relay_key.read_text()
    generate(local)
    assert relay_key.read_text() == before


def test_every_api_takes_the_tokens_of_the_environments_issuer_and_no_shared_key(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local, Environment("e2e-ab12", identity_ports=(21001, 21002)))
    for service, prefix in [(s.name, s.env_prefix) for s in LOCAL_SERVICES if s.schema is not None]:
        settings = read_env_file(local / "env" / f"{service}.env")
        assert settings[f"{prefix}AUTH_ISSUER"] == "http://127.0.0.1:21001"
        assert not {k for k in settings if "JWT" in k or k.endswith("API_TOKEN_FILE")}, service
    assert not list((local / "secrets").glob("*jwt*")) and not list((local / "secrets").glob("*api.token"))


def test_the_console_gets_the_service_urls_and_its_oidc_client_but_no_secret(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local, Environment("e2e-ab12", identity_ports=(21001, 21002)))
    console_env = (local / "env" / "console.env").read_text()
    settings = read_env_file(local / "env" / "console.env")
    assert settings["CONSOLE_SENSE_URL"] == "http://127.0.0.1:18081"
    assert (settings["CONSOLE_OIDC_ISSUER"], settings["CONSOLE_OIDC_CLIENT_ID"]) == (
        "http://127.0.0.1:21001",
        "console",
    )
    assert settings["CONSOLE_DEV_LOGIN_ADMIN_URL"] == "http://127.0.0.1:21002"
    client_secret = identity_provider.client_secret_file(local, "console")
    assert settings["CONSOLE_OIDC_CLIENT_SECRET_FILE"] == str(client_secret)
    assert client_secret.read_text().strip() not in console_env
    session_key = local / "secrets" / "console-session.key"
    assert stat.S_IMODE(session_key.stat().st_mode) == 0o600
    assert session_key.read_text().strip() not in console_env


def test_the_local_stacks_console_reads_the_stacks_jaeger_and_a_test_environments_only_its_own(
    tmp_path: Path,
) -> None:
    (tmp_path / "stack").mkdir()
    (tmp_path / "e2e").mkdir()
    local = make_stack(tmp_path / "stack")
    generate(local)
    assert read_env_file(local / "env" / "console.env")["CONSOLE_JAEGER_URL"] == "http://127.0.0.1:16686"
    test_env = make_stack(tmp_path / "e2e")
    generate(test_env, Environment("e2e-ab12"))
    assert "CONSOLE_JAEGER_URL" not in read_env_file(test_env / "env" / "console.env")
    generate(test_env, Environment("e2e-ab12", settings={"CONSOLE_JAEGER_URL": "http://127.0.0.1:23456"}))
    assert read_env_file(test_env / "env" / "console.env")["CONSOLE_JAEGER_URL"] == "http://127.0.0.1:23456"


def test_the_identity_provider_gets_its_role_its_ports_and_a_secret_per_client_generated_once(
    tmp_path: Path,
) -> None:
    local = make_stack(tmp_path)
    generate(local, Environment("e2e-ab12", identity_ports=(21001, 21002)))
    settings = read_env_file(local / "env" / identity_provider.ENV_FILE)
    assert (settings["IDENTITY_PUBLIC_PORT"], settings["IDENTITY_ADMIN_PORT"]) == ("21001", "21002")
    assert settings["IDENTITY_CONSOLE_URL"] == "http://127.0.0.1:18080"
    dsn = Path(settings["IDENTITY_DSN_FILE"])
    assert dsn.read_text().startswith("postgresql://e2e_ab12_hydra:")
    assert "admin-secret" not in (local / "env" / identity_provider.ENV_FILE).read_text()
    client_ids = {c.client_id for c in identity_provider.clients("http://127.0.0.1:18080", AUDIENCES)}
    assert client_ids == {"console", "dev-token", "operator-cli", "bench"}
    files = [identity_provider.client_secret_file(local, c) for c in sorted(client_ids)]
    files += [dsn, Path(settings["IDENTITY_SYSTEM_SECRET_FILE"])]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    before = [f.read_text() for f in files]
    assert len(set(before)) == len(before)  # no two share a secret
    generate(local, Environment("e2e-ab12", identity_ports=(21001, 21002)))
    assert [f.read_text() for f in files] == before


def test_a_second_instance_gets_an_overlay_with_its_own_port_and_capability_file(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local, Environment(instances=2, ports={"sense-reconciler@2": 19181}))
    for service in LOCAL_SERVICES:
        overlay = read_env_file(local / "env" / f"{service.name}@2.env")
        expected_port = 19181 if service.name == "sense-reconciler" else service.http_port + 100
        assert overlay[f"{service.env_prefix}HTTP_PORT"] == str(expected_port)
        assert not (local / "env" / f"{service.name}@3.env").exists()
    media = read_env_file(local / "env" / "media-worker@2.env")
    assert media["MEDIA_CAPABILITY_FILE"] == str(local / "run" / "media-worker@2.capability")
    assert "MEDIA_CAPABILITY_FILE" not in read_env_file(local / "env" / "sense-reconciler@2.env")


def test_fewer_instances_remove_the_overlays_of_the_others(tmp_path: Path) -> None:
    local = make_stack(tmp_path)
    generate(local, Environment(instances=3))
    assert (local / "env" / "console@3.env").exists()
    generate(local, Environment(instances=2))
    assert (local / "env" / "console@2.env").exists() and not (local / "env" / "console@3.env").exists()
    generate(local)
    assert not list((local / "env").glob("*@*.env"))


def test_instance_counts_and_ports_are_checked() -> None:
    for bad in (0, 5):
        with pytest.raises(ValueError, match="instances must be"):
            Environment(instances=bad)
    with pytest.raises(ValueError, match="unknown services or instances"):
        Environment(ports={"sense-reconciler@2": 19181})


def test_only_the_console_of_make_up_gets_the_stacks_prometheus(tmp_path: Path) -> None:
    stack_script = (REPO_ROOT / "infra" / "scripts" / "stack" / "prometheus.sh").read_text()
    port = re.search(r"^PROMETHEUS_PORT=(\d+)$", stack_script, re.M)
    assert port is not None and f"http://127.0.0.1:{port.group(1)}" == STACK_PROMETHEUS_URL
    (tmp_path / "up").mkdir()
    (tmp_path / "e2e").mkdir()
    local = make_stack(tmp_path / "up")
    generate(local)
    assert read_env_file(local / "env" / "console.env")["CONSOLE_PROMETHEUS_URL"] == STACK_PROMETHEUS_URL
    named = make_stack(tmp_path / "e2e")
    generate(named, Environment("e2e-ab12", identity_ports=(21001, 21002)))
    assert "CONSOLE_PROMETHEUS_URL" not in read_env_file(named / "env" / "console.env")


def test_every_service_of_the_local_stack_traces_every_change_into_the_stacks_jaeger(tmp_path: Path) -> None:
    (tmp_path / "stack").mkdir()
    (tmp_path / "e2e").mkdir()
    local = make_stack(tmp_path / "stack")
    generate(local)
    for service in LOCAL_SERVICES:
        env = read_env_file(local / "env" / f"{service.name}.env")
        p = service.env_prefix
        assert env[f"{p}TRACING_OTLP_ENDPOINT"] == "http://127.0.0.1:14318", service.name
        assert env[f"{p}TRACING_SAMPLING_RATIO"] == "1.0", service.name
    test_env = make_stack(tmp_path / "e2e")
    generate(test_env, Environment("e2e-ab12"))
    for service in LOCAL_SERVICES:
        env = read_env_file(test_env / "env" / f"{service.name}.env")
        assert not any("TRACING" in name for name in env), "a test environment traces only where it is told"
