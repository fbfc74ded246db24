"""What an operator runs against the environment: `make doctor` (the invariant check) and the alert rules,
whose metrics must be the ones the running services export."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from tests.support.alert_rules import ALERT_RULES as RULES
from tests.support.alert_rules import metric_names_in_rules
from tests.support.e2e_fixtures import Witness, eventually
from yovision_platform.tools.doctor import examine
from yovision_platform.tools.environment import LocalEnvironment

DOCTOR_TIMEOUT_SECONDS = 120.0


async def doctor(env: LocalEnvironment) -> tuple[int, dict[str, object]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "yovision_platform.tools.doctor",
        "--env-dir",
        str(env.root),
        "--wait",
        "30",
        "--json",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), DOCTOR_TIMEOUT_SECONDS)
    assert process.returncode is not None
    document: dict[str, object] = json.loads(out)
    return process.returncode, document


async def test_the_doctor_command_finds_the_environment_healthy(env: LocalEnvironment) -> None:
    code, report = await doctor(env)
    assert (code, report) == (0, {"healthy": True, "findings": []})


async def test_the_alert_rules_watch_metrics_the_services_export(env: LocalEnvironment) -> None:
    exported: set[str] = set()
    async with httpx.AsyncClient(timeout=10.0) as http:
        for service in env.services.values():
            page = (await http.get(f"{service.url}/metrics")).text
            for family in text_string_to_metric_families(page):
                exported |= {sample.name for sample in family.samples}
    assert metric_names_in_rules(RULES.read_text()) <= exported


async def test_the_doctor_reports_a_dead_letter_and_fails(env: LocalEnvironment, witness: Witness) -> None:
    """A message no one can decode, put on a topic Bell reads, is dead-lettered (never dropped), and the
    doctor says so with the service, group and code, and exits 1."""
    producer = AIOKafkaProducer(bootstrap_servers=env.kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(env.topic("media.material.v1"), b"not avro", key=b"e2e-garbage")
    finally:
        await producer.stop()
    group = f"{env.kafka_prefix}bell-receiver-audit"
    detail = f"consumer_dead_letters group={group} code=not_single_object"
    witness.plant_dead_letter("bell-receiver", detail)

    async def reported() -> bool:
        report = await examine(env.root, checks=["dead_letters"])
        return any(f.detail == detail and f.count == 1 for f in report.findings)

    await eventually(reported, what="the doctor sees the dead letter")
    code, report = await doctor(env)
    assert code == 1
    findings = report["findings"]
    assert isinstance(findings, list)
    assert [(f["check"], f["detail"]) for f in findings] == [("dead_letters", detail)]
    assert "not avro" not in json.dumps(report), "the doctor never prints a message's content"
