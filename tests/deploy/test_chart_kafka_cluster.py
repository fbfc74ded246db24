"""What the chart gives a real Kafka cluster (docs/runbooks/running-on-a-kafka-cluster.md): `kafka.bootstrap`
as a string or as a list, rendered as the one ``<P>_KAFKA_BOOTSTRAP`` setting the services validate; and
install notes that state the cluster's replication and `transaction.max.timeout.ms` with the values the code
uses (the relay's transaction timeout is a constant, not a value)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import SettingsConfigDict

from tests.deploy.chart import (
    CHART,
    DATABASE_SETTINGS,
    PRODUCTION_VALUES,
    RELEASE,
    REQUIRED_VALUES,
    containers,
    env_of,
    helm,
    render,
    render_text,
)
from tests.deploy.renders import rendered
from tests.deploy.values import values_of
from yovision_platform.messaging import CLUSTER_REPLICATION_FACTOR
from yovision_platform.messaging._txn_producer import PUBLISHER_TRANSACTION_TIMEOUT_MS, PublishError
from yovision_platform.settings import BaseServiceSettings


class Checked(BaseServiceSettings):
    model_config = SettingsConfigDict(env_prefix="KAFKA_CLUSTER_TEST_")


BROKERS = ("b-1.kafka.example.com:9092", "b-2.kafka.example.com:9092", "b-3.kafka.example.com:9092")


def bootstrap_settings(manifest_name: str | None = None, **settings: str) -> set[str]:
    """Every ``<P>_KAFKA_BOOTSTRAP`` value of the Kafka-using services' pods and migration Jobs."""
    manifest = rendered(manifest_name) if manifest_name else render(settings=settings)
    workloads = [*manifest.deployments().items(), *manifest.migration_jobs().items()]
    found: set[str] = set()
    for service, workload in workloads:
        if service not in DATABASE_SETTINGS:
            continue
        prefix = DATABASE_SETTINGS[service].model_config.get("env_prefix", "")
        for container in containers(workload):
            found.add(env_of(container)[f"{prefix}KAFKA_BOOTSTRAP"]["value"])
    return found


def test_a_bootstrap_list_renders_as_the_comma_separated_setting_of_every_service() -> None:
    listed = bootstrap_settings(**{"kafka.bootstrap": "{" + ",".join(BROKERS) + "}"})
    as_string = bootstrap_settings(**{"kafka.bootstrap": "\\,".join(BROKERS)})
    assert listed == as_string == {",".join(BROKERS)}
    # the services' own check of the setting takes it as it is
    loaded = Checked(kafka_bootstrap=",".join(BROKERS), database_dsn_file=Path("/unread"), http_port=1)
    assert loaded.kafka_bootstrap == ",".join(BROKERS)


def test_the_production_values_list_their_three_brokers() -> None:
    brokers = values_of("production")["kafka"]["bootstrap"]
    assert isinstance(brokers, list) and len(brokers) == CLUSTER_REPLICATION_FACTOR
    assert bootstrap_settings("production") == {",".join(brokers)}


@pytest.mark.parametrize(
    "value",
    [
        "{b-1:9092,b-2}",  # an entry without a port
        "{b-1:9092,b-1:9092}",  # twice the same broker
        "{}",  # no broker
        "{b-1:9092\\,b-2:9092}",  # a list entry holding two
    ],
)
def test_the_values_schema_refuses_a_wrong_bootstrap_list(value: str) -> None:
    result = render_text(settings={"kafka.bootstrap": value})
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert "/kafka/bootstrap" in result.stderr


def notes(*args: str) -> str:
    result = helm(
        "install", RELEASE, str(CHART), "--namespace", "yovision", "--dry-run=client",
        "--values", str(REQUIRED_VALUES), *args,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.partition("\nNOTES:\n")[2]


def test_the_install_notes_state_what_the_cluster_needs_with_the_values_of_the_code() -> None:
    text = " ".join(notes("--values", str(PRODUCTION_VALUES)).split())
    factor = CLUSTER_REPLICATION_FACTOR
    assert f"replication factor {factor} and min.insync.replicas={factor - 1}" in text
    assert "__consumer_offsets and __transaction_state" in text
    assert f"transaction.max.timeout.ms of at least {PUBLISHER_TRANSACTION_TIMEOUT_MS}" in text
    assert f"asks for {PUBLISHER_TRANSACTION_TIMEOUT_MS} ms" in text
    assert f"({PublishError.REJECTED.value})" in text
    assert f"Kafka at {','.join(values_of('production')['kafka']['bootstrap'])} " in text
    assert "names prefixed with `prod.`" in text
    assert "kafka.bootstrap names one broker" not in text


def test_the_install_notes_warn_of_a_single_bootstrap_broker() -> None:
    assert "kafka.bootstrap names one broker" in notes()
    assert "kafka.bootstrap names one broker" not in notes("--set", "kafka.bootstrap=" + "\\,".join(BROKERS))
