"""``make doctor``: check the invariants of a running environment of the five services.

    python -m yovision_platform.tools.doctor [--env-dir .local] [--wait SECONDS] [--json]

Checks, each a list of findings (empty = healthy):

- ``schema``: every service schema holds the tables the doctor reads. A schema not migrated (or migrated by
  an older build: ``relation "sense.outbox_cursors" does not exist``) is one finding for its service, with
  what is missing; the other checks skip that service and go on with the rest.
- ``dead_letters``: rows of every service schema's ``consumer_dead_letters``, and Sense's device-audit
  facts Bell rejected (``device_operation_dead_letters``). A dead letter never goes away
  by itself: each one is a fact that did not arrive and needs an operator (docs/runbooks/doctor.md).
- ``outbox_backlog``: outbox rows not yet past their shard's relay cursor (published to Kafka), and (when
  Sense's relay to Bell is on) facts not yet past the push's cursor (delivered to Bell).
- ``consumer_lag``: for every consumer group of the environment, Kafka's end offsets (read_committed)
  minus the position the consumer stored with its effects; each service's ``consumer_lag_messages``; and a
  consumer loop whose ``consumer_last_poll_timestamp_seconds`` is over ``CONSUMER_STALL_SECONDS`` old
  (stuck on an await while HTTP serves: its lag gauge would show the frozen last value).
- ``refused_configs``: Sense's devices whose configuration MediaMTX refused (a 4xx that retrying cannot
  change: failed, not retried until the device changes), per MediaMTX server. Like a dead letter, each one
  needs an operator: a PATCH with a configuration MediaMTX takes converges it.
- ``kafka_replication``: every bootstrap broker is in the cluster's metadata; no partition of the
  environment's topics or of ``__consumer_offsets`` / ``__transaction_state`` has a replica out of sync;
  on a cluster of three or more brokers, no such topic has fewer than three replicas (one created with
  replication 1 loses its data with its broker).
- ``identity_provider``: the environment's OpenID provider (when it has one) is ready and its JWKS serves
  a signing key: without one, no access token of the environment verifies.
- ``observability``: the environment's trace store (Jaeger, when ``stack.env`` names its query API) lists
  its services, and its Prometheus (when named) is ready: without them no trace or alert reaches anyone.
- ``secrets``: any secret of the environment (every file in ``<env>/secrets``, the PostgreSQL admin DSN's
  password, and what the caller adds) found in a service log, a ``/metrics`` page, a Kafka message
  (key, value or header) of the environment's topics or a span of each service's latest
  ``SPAN_SCAN_TRACES`` traces in the environment's Jaeger (when it has one); and in the identity
  provider's log.

Backlog, lag and replicas out of sync shrink on their own; ``--wait`` re-checks them until they are gone or
the time is up.
Dead letters, refused configurations and leaked secrets are reported at once. The doctor only reads: it
connects with the admin DSN named by ``<env>/stack.env`` and runs SELECTs, and reads Kafka without joining
a consumer group. Findings
name the service, schema, table or group and a count, never a secret or a message's content.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import asyncpg
import httpx
from aiokafka import TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from yovision_platform.localstack import LocalStack, read_env_file
from yovision_platform.messaging import (
    admin_client,
    plain_consumer,
    read_replication,
    seek_to_start,
    unpassed_count_sql,
)
from yovision_platform.storage import Identifier
from yovision_platform.tools import identity_provider
from yovision_platform.tools.devsecrets import LOCAL_SERVICES, LocalService
from yovision_platform.web import AUDIENCES

__all__ = ["CHECKS", "Finding", "Report", "examine", "main", "secrets_of"]

CHECKS = (
    "schema",
    "dead_letters",
    "outbox_backlog",
    "consumer_lag",
    "refused_configs",
    "kafka_replication",
    "identity_provider",
    "observability",
    "secrets",
)
SETTLING_CHECKS = frozenset({"outbox_backlog", "consumer_lag", "kafka_replication"})
# The checks that read the services' schemas; ``schema`` reads what all the others read.
SCHEMA_READING_CHECKS = frozenset(
    {"schema", "dead_letters", "outbox_backlog", "refused_configs", "consumer_lag"}
)
# What PostgreSQL answers when a schema lacks what the doctor reads: no such schema, table, column, function
# or type. The service is not migrated, or was migrated by an older build.
UNMIGRATED_ERRORS = (
    asyncpg.exceptions.InvalidSchemaNameError,
    asyncpg.exceptions.UndefinedTableError,
    asyncpg.exceptions.UndefinedColumnError,
    asyncpg.exceptions.UndefinedFunctionError,
    asyncpg.exceptions.UndefinedObjectError,
)
# Kafka's own topics the services depend on: consumer positions and transactions.
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
MIN_SECRET_CHARS = 12
KAFKA_TIMEOUT_SECONDS = 20.0
READ_BATCH_TIMEOUT_MS = 1000
HTTP_TIMEOUT_SECONDS = 5.0
# The traces read per service for the secrets check: what the last minutes of a flow or of `make up` made.
SPAN_SCAN_TRACES = 50
WAIT_POLL_SECONDS = 0.5
CONSUMER_STALL_SECONDS = 30
MAX_DETAIL_CHARS = 200
CONSUMER_GAUGES = ("consumer_lag_messages", "consumer_last_poll_timestamp_seconds")


def _flag(env: Mapping[str, str], name: str, *, former: str) -> bool:
    """A boolean setting of an env file, read by its former name too until the next release."""
    return env.get(name, env.get(former, "false")).lower() == "true"


@dataclass(frozen=True)
class Finding:
    check: str
    where: str
    detail: str
    count: int = 1


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.findings

    def of(self, check: str) -> list[Finding]:
        return [f for f in self.findings if f.check == check]

    def text(self) -> str:
        if self.healthy:
            return "doctor: healthy (" + ", ".join(CHECKS) + ")"
        lines = [f"doctor: {len(self.findings)} finding(s)"]
        lines += [f"  {f.check:<15} {f.where}: {f.detail} (x{f.count})" for f in self.findings]
        return "\n".join(lines)


@dataclass(frozen=True)
class ServiceConfig:
    """What the doctor needs of one service of the environment, from its generated env file."""

    service: LocalService
    schema: Identifier | None  # None: a service without a database (only its log and /metrics are read)
    kafka_prefix: str
    instances: tuple[tuple[str, int], ...]  # (name, HTTP port) of each process: `<service>`, `<service>@2`...
    audit_push: bool


def _configs(env_dir: Path) -> list[ServiceConfig]:
    configs: list[ServiceConfig] = []
    for service in LOCAL_SERVICES:
        path = env_dir / "env" / f"{service.name}.env"
        if not path.exists():
            continue
        env = read_env_file(path)
        p = service.env_prefix
        configs.append(
            ServiceConfig(
                service=service,
                schema=None
                if service.schema is None
                else Identifier(env.get(f"{p}DATABASE_SCHEMA", service.schema)),
                kafka_prefix=env.get(f"{p}KAFKA_PREFIX", ""),
                instances=_instances(env_dir, service, int(env.get(f"{p}HTTP_PORT", str(service.http_port)))),
                audit_push=_flag(env, f"{p}AUDIT_PUSH_ENABLED", former=f"{p}BELL_RELAY_ENABLED"),
            )
        )
    return configs


def _instances(env_dir: Path, service: LocalService, port: int) -> tuple[tuple[str, int], ...]:
    """The service's processes (infra/scripts/services.sh): itself, then one per overlay `<service>@i.env`."""
    found = [(service.name, port)]
    for overlay in sorted((env_dir / "env").glob(f"{service.name}@*.env")):
        overlay_port = read_env_file(overlay).get(f"{service.env_prefix}HTTP_PORT")
        if overlay_port is not None:
            found.append((overlay.stem, int(overlay_port)))
    return tuple(found)


def secrets_of(env_dir: Path, stack: LocalStack) -> set[str]:
    """Every secret of the environment: each secret file's content, each DSN's password, and the password
    of each MediaMTX server's API credentials."""
    found: set[str] = set()
    for server in stack.media_servers:
        credentials = server.credentials()
        if credentials is not None:
            found.add(credentials.password.get_secret_value())
    texts = [stack.admin_dsn]
    secret_dir = env_dir / "secrets"
    if secret_dir.is_dir():
        texts += [
            p.read_text(encoding="utf-8", errors="replace") for p in secret_dir.iterdir() if p.is_file()
        ]
    for text in texts:
        value = text.strip()
        found.add(value)
        if value.startswith(("postgresql://", "postgres://")):
            password = urlsplit(value).password
            if password:
                found |= {password, unquote(password)}
    return {s for s in found if len(s) >= MIN_SECRET_CHARS}


async def _dead_letters(conn: asyncpg.Connection, config: ServiceConfig) -> list[Finding]:
    assert config.schema is not None
    s = config.schema.quoted
    where = f"{config.service.name} ({config.schema})"
    rows = await conn.fetch(
        f"SELECT consumer_group, error_code, count(*) AS n FROM {s}.consumer_dead_letters "
        "GROUP BY consumer_group, error_code ORDER BY 1, 2"
    )
    findings = [
        Finding(
            "dead_letters",
            where,
            f"consumer_dead_letters group={r['consumer_group']} code={r['error_code']}",
            r["n"],
        )
        for r in rows
    ]
    if config.service.schema == "sense":
        facts = await conn.fetch(
            f"SELECT error_code, count(*) AS n FROM {s}.device_operation_dead_letters GROUP BY 1 ORDER BY 1"
        )
        findings += [
            Finding("dead_letters", where, f"device_operation_dead_letters code={r['error_code']}", r["n"])
            for r in facts
        ]
    return findings


async def _refused_configs(conn: asyncpg.Connection, config: ServiceConfig) -> list[Finding]:
    if config.service.schema != "sense":
        return []
    assert config.schema is not None
    rows = await conn.fetch(
        "SELECT media_server_id, count(*) AS n "
        f"FROM {config.schema.quoted}.reconcile_state "
        "WHERE next_attempt_at = 'infinity' AND observed_generation < desired_generation "
        "GROUP BY 1 ORDER BY 1"
    )
    where = f"{config.service.name} ({config.schema})"
    return [
        Finding(
            "refused_configs",
            where,
            f"devices whose configuration MediaMTX refused, server={r['media_server_id']}",
            r["n"],
        )
        for r in rows
    ]


async def _backlog(conn: asyncpg.Connection, config: ServiceConfig) -> list[Finding]:
    assert config.schema is not None
    where = f"{config.service.name} ({config.schema})"
    findings: list[Finding] = []
    unpublished: int = await conn.fetchval(unpassed_count_sql(config.schema, "outbox"))
    if unpublished:
        findings.append(Finding("outbox_backlog", where, "outbox rows not published to Kafka", unpublished))
    if config.service.schema == "sense" and config.audit_push:
        pending: int = await conn.fetchval(
            unpassed_count_sql(config.schema, "device_operation_outbox", sharded=False)
        )
        if pending:
            findings.append(
                Finding("outbox_backlog", where, "device-audit facts not delivered to Bell", pending)
            )
    return findings


async def _positions(
    conn: asyncpg.Connection, config: ServiceConfig
) -> dict[tuple[str, TopicPartition], int]:
    assert config.schema is not None
    rows = await conn.fetch(
        "SELECT consumer_group, topic, kafka_partition, next_offset "
        f"FROM {config.schema.quoted}.consumer_positions"
    )
    return {
        (r["consumer_group"], TopicPartition(r["topic"], r["kafka_partition"])): r["next_offset"]
        for r in rows
    }


async def _end_offsets(bootstrap: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    consumer = plain_consumer(
        bootstrap, group_id=None, enable_auto_commit=False, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        ends: dict[TopicPartition, int] = await consumer.end_offsets(list(partitions))
        return ends
    finally:
        await consumer.stop()


async def _partitions_of(bootstrap: str, topics: Iterable[str]) -> list[TopicPartition]:
    topics = sorted(topics)
    if not topics:
        return []
    consumer = plain_consumer(bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        found: list[TopicPartition] = []
        for topic in topics:
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                await consumer._client.force_metadata_update()  # aiokafka has no public call for this
                parts = consumer.partitions_for_topic(topic) or set()
            found += [TopicPartition(topic, p) for p in sorted(parts)]
        return found
    finally:
        await consumer.stop()


async def _lag(
    stack: LocalStack,
    stored: Mapping[str, dict[tuple[str, TopicPartition], int]],
    configs: Sequence[ServiceConfig],
) -> list[Finding]:
    """Two views, both must be zero: the positions each consumer stored with its effects (`stored`, by
    service) against the end of every partition of the topics it has applied events from, and each running
    service's own ``consumer_lag_messages`` over the partitions assigned to it (which also covers partitions
    it has not applied anything from yet)."""
    positions: dict[tuple[str, TopicPartition], int] = {}
    group_service: dict[str, str] = {}
    for service, service_positions in stored.items():
        for (group, tp), offset in service_positions.items():
            positions[(group, tp)] = offset
            group_service[group] = service
    watched: dict[str, set[str]] = {}
    for group, tp in positions:
        watched.setdefault(group, set()).add(tp.topic)
    partitions = await _partitions_of(stack.kafka_bootstrap, {t for ts in watched.values() for t in ts})
    ends = await _end_offsets(stack.kafka_bootstrap, partitions)
    findings: list[Finding] = []
    for group in sorted(watched):
        behind = {
            tp: ends.get(tp, 0) - positions.get((group, tp), 0)
            for tp in partitions
            if tp.topic in watched[group] and ends.get(tp, 0) > positions.get((group, tp), 0)
        }
        if behind:
            shown = ", ".join(f"{tp.topic}[{tp.partition}]+{n}" for tp, n in sorted(behind.items())[:5])
            detail = f"group={group} stored positions behind: {shown}"
            findings.append(Finding("consumer_lag", group_service[group], detail, sum(behind.values())))
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS) as http:
        for config in configs:
            for instance, port in config.instances:
                samples = await _metrics(http, port, CONSUMER_GAUGES)
                reported = samples.get("consumer_lag_messages")
                if reported:
                    findings.append(Finding("consumer_lag", instance, "consumer_lag_messages", int(reported)))
                stalled = stalled_seconds(samples.get("consumer_last_poll_timestamp_seconds"), time.time())
                if stalled is not None:
                    detail = f"consumer loop stalled: last round {stalled} s ago"
                    findings.append(Finding("consumer_lag", instance, detail, 1))
    return findings


def stalled_seconds(last_poll: float | None, now: float) -> int | None:
    """Whole seconds since a consumer loop's last round when over CONSUMER_STALL_SECONDS (a healthy loop
    finishes one at least every poll timeout plus one batch), else None."""
    if last_poll is None or now - last_poll <= CONSUMER_STALL_SECONDS:
        return None
    return int(now - last_poll)


async def _metrics(http: httpx.AsyncClient, port: int, names: Iterable[str]) -> dict[str, float]:
    """The values of the named unlabelled samples on a process's /metrics page (one read); absent names,
    or all when the page is unreachable, are left out."""
    wanted = set(names)
    try:
        page = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    except httpx.HTTPError:
        return {}
    return {
        sample.name: float(sample.value)
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name in wanted and not sample.labels
    }


def _scan(text: bytes, needles: Iterable[bytes]) -> int:
    return sum(1 for needle in needles if needle in text)


async def _secrets_in_logs_and_metrics(
    env_dir: Path, configs: Sequence[ServiceConfig], needles: Sequence[bytes]
) -> list[Finding]:
    findings: list[Finding] = []
    log_dir = env_dir / "logs"
    for name in [instance for config in configs for instance, _ in config.instances] + [
        identity_provider.NAME
    ]:
        log = log_dir / f"{name}.log"
        if log.is_file() and (hits := _scan(log.read_bytes(), needles)):
            findings.append(Finding("secrets", name, f"secret(s) in {log.name}", hits))
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS) as http:
        for instance, port in [instance for config in configs for instance in config.instances]:
            try:
                page = (await http.get(f"http://127.0.0.1:{port}/metrics")).content
            except httpx.HTTPError:
                continue  # a stopped service has no metrics page; the logs were still read
            if hits := _scan(page, needles):
                findings.append(Finding("secrets", instance, "secret(s) on /metrics", hits))
    return findings


async def _observability(stack: LocalStack) -> list[Finding]:
    probes = (
        ("jaeger", stack.jaeger_query_url, "/api/services", "its query API does not answer"),
        ("prometheus", stack.prometheus_url, "/-/ready", "not ready"),
    )
    findings: list[Finding] = []
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_SECONDS) as http:
        for name, url, path, problem in probes:
            if url is None:
                continue
            try:
                answered = (await http.get(url + path)).status_code == httpx.codes.OK
            except httpx.HTTPError:
                answered = False
            if not answered:
                findings.append(Finding("observability", name, problem))
    return findings


async def _secrets_in_spans(
    query_url: str, configs: Sequence[ServiceConfig], needles: Sequence[bytes]
) -> list[Finding]:
    """Each service's latest traces as Jaeger's query API serves them (names, attributes, events)."""
    findings: list[Finding] = []
    async with httpx.AsyncClient(base_url=query_url, timeout=HTTP_TIMEOUT_SECONDS) as http:
        for config in configs:
            params = {"service": config.service.name, "limit": str(SPAN_SCAN_TRACES), "lookback": "1h"}
            try:
                page = (await http.get("/api/traces", params=params)).content
            except httpx.HTTPError:
                return findings  # no trace store running: nothing to read
            if hits := _scan(page, needles):
                findings.append(Finding("secrets", config.service.name, "secret(s) in spans", hits))
    return findings


async def _environment_topics(stack: LocalStack, prefixes: set[str]) -> list[str]:
    """The topics of the environment's Kafka prefixes (Kafka's internal topics left out)."""
    admin = admin_client(stack.kafka_bootstrap, client_id="yovision-doctor")
    await admin.start()
    try:
        topics = [
            t
            for t in await admin.list_topics()
            if not t.startswith("__") and any(t.startswith(p) for p in prefixes)
        ]
    finally:
        await admin.close()
    if "" in prefixes:  # the unnamed environment: its topics are the catalogue names (no dot-prefix)
        topics = [t for t in topics if t.split(".")[0] in {s.schema for s in LOCAL_SERVICES} | {"platform"}]
    return sorted(topics)


async def _replication(stack: LocalStack, prefixes: set[str]) -> list[Finding]:
    """Brokers missing from the cluster's metadata, partitions (of the environment's topics and Kafka's
    internal ones) with a replica out of sync, and topics with fewer replicas than the cluster's factor."""
    listed = len(stack.kafka_bootstrap.split(","))
    topics = [*await _environment_topics(stack, prefixes), *INTERNAL_TOPICS]
    try:
        replication = await read_replication(stack.kafka_bootstrap, topics)
    except Exception as exc:  # any failure to read is the finding
        return [Finding("kafka_replication", "kafka", f"the cluster did not answer ({type(exc).__name__})")]
    findings: list[Finding] = []
    if len(replication.brokers) < listed:
        detail = f"{len(replication.brokers)} of {listed} bootstrap brokers in the cluster's metadata"
        findings.append(Finding("kafka_replication", "kafka", detail, listed - len(replication.brokers)))
    for p in replication.under_replicated():
        detail = f"under-replicated: {p.in_sync} of {p.replicas} replicas in sync"
        findings.append(Finding("kafka_replication", f"{p.topic}[{p.partition}]", detail))
    for topic, replicas in replication.under_factor().items():
        detail = f"replication factor {replicas}, the cluster's is {replication.wanted_factor}"
        findings.append(Finding("kafka_replication", topic, detail))
    return findings


async def _secrets_in_events(
    stack: LocalStack, prefixes: set[str], needles: Sequence[bytes]
) -> list[Finding]:
    topics = await _environment_topics(stack, prefixes)
    partitions = await _partitions_of(stack.kafka_bootstrap, topics)
    ends = await _end_offsets(stack.kafka_bootstrap, partitions)
    pending = [tp for tp in partitions if ends.get(tp, 0) > 0]
    if not pending:
        return []
    hits_by_topic: dict[str, int] = {}
    consumer = plain_consumer(
        stack.kafka_bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        consumer.assign(pending)
        await seek_to_start(consumer, pending)
        deadline = time.monotonic() + KAFKA_TIMEOUT_SECONDS
        remaining = set(pending)
        while remaining and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=READ_BATCH_TIMEOUT_MS)
            for tp, messages in batches.items():
                for message in messages:
                    blob = (
                        (message.key or b"")
                        + (message.value or b"")
                        + b"".join(v for _, v in message.headers)
                    )
                    if hits := _scan(blob, needles):
                        hits_by_topic[tp.topic] = hits_by_topic.get(tp.topic, 0) + hits
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
    finally:
        await consumer.stop()
    return [
        Finding("secrets", topic, "secret(s) in Kafka messages", n)
        for topic, n in sorted(hits_by_topic.items())
    ]


async def _read_schema(
    conn: asyncpg.Connection, config: ServiceConfig, wanted: set[str]
) -> tuple[list[Finding], dict[tuple[str, TopicPartition], int] | None]:
    """The service's findings of the wanted checks that read its schema, and its consumers' stored
    positions (None when ``consumer_lag`` is not wanted), read in a savepoint. A schema that lacks what
    they read is one ``schema`` finding instead, and no positions; the savepoint keeps the transaction
    usable for the next service. Every read runs, in one order, whichever of these checks is wanted (they
    are a few small SELECTs): so each pass of ``--wait`` finds the same thing missing first."""
    if not wanted & SCHEMA_READING_CHECKS:
        return [], None
    try:
        async with conn.transaction():
            findings = [
                *await _dead_letters(conn, config),
                *await _backlog(conn, config),
                *await _refused_configs(conn, config),
            ]
            positions = await _positions(conn, config)
    except UNMIGRATED_ERRORS as exc:
        return [_unmigrated(config, exc)], None
    return [f for f in findings if f.check in wanted], positions if "consumer_lag" in wanted else None


def _unmigrated(config: ServiceConfig, exc: asyncpg.PostgresError) -> Finding:
    """The ``schema`` finding of a service whose schema lacks what the doctor reads: PostgreSQL's first line
    (it names only the missing schema, table, column or function) and what to run."""
    missing = (str(exc).splitlines() or [type(exc).__name__])[0][:MAX_DETAIL_CHARS]
    detail = f"schema not migrated: {missing}; run `{config.service.name} migrate`"
    return Finding("schema", f"{config.service.name} ({config.schema})", detail)


async def examine(
    env_dir: Path,
    *,
    extra_secrets: Iterable[str] = (),
    checks: Iterable[str] = CHECKS,
) -> Report:
    """One pass of the chosen checks over the environment in ``env_dir``."""
    wanted = set(checks)
    stack = LocalStack.load(env_dir)
    configs = _configs(env_dir)
    report = Report()
    conn = await asyncpg.connect(stack.admin_dsn)
    try:
        stored: dict[str, dict[tuple[str, TopicPartition], int]] = {}
        async with conn.transaction(readonly=True):
            for config in (c for c in configs if c.schema is not None):
                findings, positions = await _read_schema(conn, config, wanted)
                report.findings += findings
                if positions is not None:
                    stored[config.service.name] = positions
        if "consumer_lag" in wanted:
            report.findings += await _lag(stack, stored, configs)
    finally:
        await conn.close()
    prefixes = {c.kafka_prefix for c in configs if c.schema is not None}
    if "kafka_replication" in wanted:
        report.findings += await _replication(stack, prefixes)
    if "identity_provider" in wanted and (env_dir / "env" / identity_provider.ENV_FILE).is_file():
        provider = identity_provider.IdentityProvider.load(env_dir, AUDIENCES)
        if not await provider.healthy():
            report.findings.append(
                Finding("identity_provider", identity_provider.NAME, "not ready, or its JWKS serves no key")
            )
    if "observability" in wanted:
        report.findings += await _observability(stack)
    if "secrets" in wanted:
        needles = sorted(
            s.encode()
            for s in secrets_of(env_dir, stack) | {s for s in extra_secrets if len(s) >= MIN_SECRET_CHARS}
        )
        report.findings += await _secrets_in_logs_and_metrics(env_dir, configs, needles)
        report.findings += await _secrets_in_events(stack, prefixes, needles)
        if stack.jaeger_query_url is not None:
            report.findings += await _secrets_in_spans(stack.jaeger_query_url, configs, needles)
    return report


async def examine_until_settled(
    env_dir: Path, *, wait_seconds: float, extra_secrets: Iterable[str] = (), checks: Iterable[str] = CHECKS
) -> Report:
    """Like :func:`examine`, re-checking backlog and lag until they are gone or ``wait_seconds`` passed
    (their findings are those of that last pass); the other checks run once, afterwards."""
    wanted = set(checks)
    settling = wanted & SETTLING_CHECKS
    deadline = time.monotonic() + wait_seconds
    settled = Report()
    while settling:
        settled = await examine(env_dir, checks=settling)
        # Only the settling checks' findings go away by waiting (a schema not migrated does not).
        if not any(f.check in SETTLING_CHECKS for f in settled.findings) or time.monotonic() >= deadline:
            break
        await asyncio.sleep(WAIT_POLL_SECONDS)
    # The settling checks' answer is the last pass's: examining them again would race with work still
    # going on (a transcode's next event) and report a backlog the wait just saw gone.
    final = await examine(env_dir, extra_secrets=extra_secrets, checks=wanted - settling)
    # Both passes find a schema not migrated: report it once.
    return Report(list(dict.fromkeys([*settled.findings, *final.findings])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="doctor", description="check the invariants of a running environment"
    )
    parser.add_argument("--env-dir", type=Path, default=Path(".local"))
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to let backlog and lag settle")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    if not (args.env_dir / "stack.env").exists():
        print(f"doctor: {args.env_dir}/stack.env missing: start the stack first (make up)", file=sys.stderr)
        return 2
    report = asyncio.run(examine_until_settled(args.env_dir.resolve(), wait_seconds=args.wait))
    if args.json:
        print(json.dumps({"healthy": report.healthy, "findings": [asdict(f) for f in report.findings]}))
    else:
        print(report.text())
    return 0 if report.healthy else 1


if __name__ == "__main__":
    sys.exit(main())
