"""Every service, two instances each, on a private three-broker cluster (replication 3, min.insync.replicas
2), driven only through the public APIs under steady load: devices created and changed on both Sense
instances, watchers asked to check a target whose value keeps changing on both signal-watcher instances.

Three faults, one after another, each followed by the same invariants:
- a SIGKILL of the broker leading `sense.device.v1` partition 0 that also coordinates a relay's
  transactions, then its restart;
- a rolling restart of the three brokers, each back in sync before the next, while the second instance of
  every service is SIGKILLed (and started again after the second broker);
- a zombie broker: SIGSTOPped for longer than its session timeout, then SIGCONTed.

After each: every device has converged (MediaMTX holds its path and Sense reports its generation
observed), Bell holds every Sense fact of the load exactly once, every trigger a check recorded is on the
trigger topic, `make doctor` is healthy (no dead letter, outboxes drained, no lag, no secret), no pipeline
stalled for more than 30 s while work was waiting, and no read_committed consumer (the services' own
configuration) read a record of an aborted Kafka transaction, checked against the partition's log as
Kafka's DumpLogSegments prints it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import signal as signals
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import TopicPartition
from confluent_kafka import Producer

from tests.cluster.test_broker_failover import coordinator_partition, create_replicated_topic, leaders
from tests.support.e2e_fixtures import (
    E2E_SETTINGS,
    SENSE_PERMISSIONS,
    Witness,
    camera_source,
    device_body,
    path_names,
    user_token,
)
from tests.support.e2e_flows import Target, price_watcher, signed_in_through_hydra
from tests.support.kafka import wait_until
from tests.support.stack import REPO_ROOT, Stack
from yovision_platform.messaging import (
    OUTBOX_SHARDS,
    OUTBOX_TABLE,
    AvroSerde,
    KafkaNames,
    SchemaRegistry,
    plain_consumer,
    seek_to_start,
    transactional_id,
)
from yovision_platform.storage import Identifier
from yovision_platform.tools.doctor import Report, examine_until_settled
from yovision_platform.tools.environment import LocalEnvironment, local_environment
from yovision_platform.tools.kafka_cluster import KafkaCluster, Node

pytestmark = pytest.mark.e2e

SERVICES = (
    "sense-reconciler",
    "orphan-scanner",
    "bell-receiver",
    "signal-watcher",
    "media-worker",
    "console",
)
SERVICES_WITH_OUTBOX = SERVICES[:5]
CONSUMING_SERVICES = ("sense-reconciler", "orphan-scanner", "bell-receiver")
ABORTED_RECORDS = 5
DEVICE_TOPIC = "sense.device.v1"
TRIGGER_TOPIC = "signal.trigger.v1"
OPERATOR = "cluster-operator"
SITE_CHANNELS = 128  # the most a site may have: the load moves to a new site when one is full
CREATE_EVERY_SECONDS = 1.0
CHANGE_EVERY_SECONDS = 1.0
WATCHERS = 2
CHECK_EVERY_SECONDS = 6.0  # signal-watcher refuses a check-now within 5 s of the last check
STALL_LIMIT_SECONDS = 30.0
WARM_UP_SECONDS = 3.0
KILLED_SECONDS = 12.0  # longer than the broker session (9 s) and the consumer session (10 s) timeouts
ZOMBIE_SECONDS = 12.0
IN_SYNC_WITHIN_SECONDS = 120.0
CONVERGE_WITHIN_SECONDS = 120.0
SETTLE_SECONDS = 120.0
REQUEST_ATTEMPTS = 20


@pytest.fixture(scope="module")
async def env(
    cluster: KafkaCluster, stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalEnvironment]:
    name = f"ha-{uuid.uuid4().hex[:6]}"
    async with local_environment(
        tmp_path_factory.mktemp("ha-env"),
        name,
        settings=E2E_SETTINGS,
        media_servers=("mtx-a",),
        instances=2,
        kafka_bootstrap=cluster.layout.bootstrap,
    ) as environment:
        yield environment


@dataclass
class Pipeline:
    """How far one pipeline got, sampled: the longest time its count stood still while work waited."""

    name: str
    done: int = 0
    since: float = field(default_factory=time.monotonic)
    longest_stall: float = 0.0

    def restart(self) -> None:
        """A new scenario: its stalls count from its own start, never across the checks between two
        scenarios (the load is idle then, and a first sample that finds work already waiting would count
        that gap: it once reported a 32.6 s stall for the 32 s of the previous scenario's checks)."""
        self.since, self.longest_stall = time.monotonic(), 0.0

    def sample(self, done: int, waiting: bool) -> None:
        now = time.monotonic()
        if done != self.done or not waiting:
            self.done, self.since = done, now
        self.longest_stall = max(self.longest_stall, now - self.since)


class Api:
    """One service's API on both instances, as a load balancer would offer it: a request refused by a
    connection (an instance down) goes to the other instance."""

    def __init__(self, env: LocalEnvironment, service: str, token: str, witness: Witness) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        self._clients = [
            httpx.AsyncClient(base_url=env.url(name), headers=headers, timeout=20.0)
            for name in (service, f"{service}@2")
        ]
        self._turn = itertools.count()
        self.unanswered = 0  # requests sent again because their instance died before it answered
        witness.secrets.add(token)

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """The answer of either instance. A request refused by a connection was never sent: it goes to the
        other instance. So does one whose instance was SIGKILLed before it answered (its outcome unknown), as
        a load balancer's client would send it again: each request of the load may be repeated (the same
        change, a check now, a create whose repeat finds its path taken: `Load._creates`)."""
        last: Exception | None = None
        for attempt in range(REQUEST_ATTEMPTS):
            http = self._clients[next(self._turn) % 2]
            try:
                return await http.request(method, url, **kwargs)
            except httpx.ConnectError as exc:
                last = exc
            except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
                self.unanswered += 1
                last = exc
            await asyncio.sleep(0.1 * attempt)
        raise AssertionError(f"{method} {url}: no instance answered") from last

    async def aclose(self) -> None:
        for http in self._clients:
            await http.aclose()


@dataclass
class Load:
    """Steady device creates and changes, and watcher checks of a changing target, until stopped."""

    sense: Api
    signal: Api
    target: Target
    witness: Witness
    tenant: str = field(default_factory=lambda: f"tenant-ha-{uuid.uuid4().hex[:6]}")
    site: str = ""
    site_devices: int = 0
    devices: dict[str, str] = field(default_factory=dict)  # path -> device id
    watchers: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    _price: int = 100

    async def new_site(self) -> None:
        self.site, self.site_devices = f"site-{uuid.uuid4().hex[:6]}", 0
        limit = await self.sense.request(
            "PUT", f"/v1/sites/{self.tenant}/{self.site}", json={"max_video_channels": SITE_CHANNELS}
        )
        assert limit.status_code == 200, limit.text

    async def prepare(self) -> None:
        await self.new_site()
        self.target.answer_price(self._price)
        for n in range(WATCHERS):
            created = await self.signal.request(
                "POST",
                "/v1/signal-watchers",
                json=price_watcher(f"ha watch {n}", "agent-ha", self.target.url),
            )
            assert created.status_code == 201, created.text
            self.watchers.append(created.json()["id"])

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self.stop.clear()
        tasks = [asyncio.create_task(self._creates()), asyncio.create_task(self._changes())]
        tasks += [asyncio.create_task(self._checks(w)) for w in self.watchers]
        try:
            yield
        finally:
            self.stop.set()
            await asyncio.gather(*tasks)
        assert not self.refusals, self.refusals[:5]

    async def _every(self, seconds: float, step: Callable[[], Awaitable[None]]) -> None:
        while not self.stop.is_set():
            await step()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), seconds)

    async def _creates(self) -> None:
        async def create() -> None:
            if self.site_devices == SITE_CHANNELS:
                await self.new_site()
            self.site_devices += 1
            path = f"ha-{uuid.uuid4().hex[:10]}"
            body = device_body(self.tenant, self.site, path, camera_source(self.witness, "10.8.0.1"))
            response = await self.sense.request("POST", "/v1/devices", json=body)
            if response.status_code == 201:
                self.devices[path] = response.json()["id"]
            elif response.status_code == 409 and response.json()["code"] == "path_name_taken":
                self.devices[path] = await self.device_at(path)  # a repeat: the first one was taken
            else:
                self.refusals.append(f"create: {response.status_code} {response.text[:200]}")

        await self._every(CREATE_EVERY_SECONDS, create)

    async def device_at(self, path: str) -> str:
        after: str | None = None
        while True:
            params = {"tenant_id": self.tenant, "site_id": self.site, "limit": 100}
            page = (
                await self.sense.request(
                    "GET", "/v1/devices", params=params | ({"after": after} if after else {})
                )
            ).json()
            for device in page["items"]:
                if device["path_name"] == path:
                    return str(device["id"])
            after = page["next_after"]
            assert after is not None, f"{path}: taken, yet no device of this site has it"

    async def _changes(self) -> None:
        async def change() -> None:
            if not self.devices:
                return
            device_id = list(self.devices.values())[len(self.devices) // 2]
            source = camera_source(self.witness, "10.8.0.2")
            response = await self.sense.request(
                "PATCH", f"/v1/devices/{device_id}", json={"source_uri": source}
            )
            if response.status_code != 200:
                self.refusals.append(f"change: {response.status_code} {response.text[:200]}")

        await self._every(CHANGE_EVERY_SECONDS, change)

    async def _checks(self, watcher_id: str) -> None:
        async def check() -> None:
            self._price += 1
            self.target.answer_price(self._price)
            response = await self.signal.request("POST", f"/v1/signal-watchers/{watcher_id}/check")
            if response.status_code not in (202, 429):
                self.refusals.append(f"check: {response.status_code} {response.text[:200]}")

        await self._every(CHECK_EVERY_SECONDS, check)


@dataclass
class Rig:
    env: LocalEnvironment
    cluster: KafkaCluster
    load: Load
    admin_db: asyncpg.Connection
    mediamtx: httpx.AsyncClient
    pipelines: dict[str, Pipeline] = field(default_factory=dict)

    async def facts_in_sense(self) -> set[uuid.UUID]:
        schema = self.env.service("sense-reconciler").schema
        rows = await self.admin_db.fetch(
            f'SELECT event_id FROM "{schema}".device_operation_outbox WHERE tenant_id = $1', self.load.tenant
        )
        return {r["event_id"] for r in rows}

    async def facts_in_bell(self) -> list[uuid.UUID]:
        schema = self.env.service("bell-receiver").schema
        rows = await self.admin_db.fetch(
            f'SELECT event_id FROM "{schema}".audit_events '
            "WHERE source_system = 'sense' AND tenant_id = $1",
            self.load.tenant,
        )
        return [r["event_id"] for r in rows]

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Samples the two pipelines of the load every second: Sense (API -> outbox -> relay -> Kafka ->
        device consumer -> MediaMTX) and the audit push (Sense -> Bell)."""
        stop = asyncio.Event()
        paths = self.pipelines.setdefault("sense to MediaMTX", Pipeline("sense to MediaMTX"))
        audit = self.pipelines.setdefault("sense to Bell", Pipeline("sense to Bell"))
        paths.restart()
        audit.restart()

        async def sample() -> None:
            while not stop.is_set():
                configured = len(set(self.load.devices) & await path_names(self.mediamtx))
                paths.sample(configured, configured < len(self.load.devices))
                facts = len(await self.facts_in_bell())
                audit.sample(facts, facts < len(await self.facts_in_sense()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)

        task = asyncio.create_task(sample())
        try:
            yield
        finally:
            stop.set()
            await task

    async def in_sync(self) -> None:
        await wait_until(
            self.cluster.in_sync,
            interval=0.5,
            timeout_seconds=IN_SYNC_WITHIN_SECONDS,
            what="every partition back in sync",
        )


@pytest.fixture(scope="module")
async def rig(env: LocalEnvironment, cluster: KafkaCluster) -> AsyncIterator[Rig]:
    witness = Witness()
    sense_token = await user_token(env, "sense-reconciler", OPERATOR, *SENSE_PERMISSIONS)
    signal_token = await user_token(env, "signal-watcher", OPERATOR)
    sense, signal = (
        Api(env, "sense-reconciler", sense_token, witness),
        Api(env, "signal-watcher", signal_token, witness),
    )
    sandbox = env.media_servers["mtx-a"]
    admin_db = await asyncpg.connect(env.stack.admin_dsn)
    await admin_db.execute("SET default_transaction_read_only = on")
    try:
        async with (
            Target() as target,
            httpx.AsyncClient(base_url=sandbox.url, timeout=10.0, auth=sandbox.auth()) as mediamtx,
        ):
            load = Load(sense, signal, target, witness)
            await load.prepare()
            yield Rig(env, cluster, load, admin_db, mediamtx)
    finally:
        await sense.aclose()
        await signal.aclose()
        await admin_db.close()


async def invariants(rig: Rig, scenario: str) -> None:
    env, load = rig.env, rig.load
    sense_api = load.sense

    async def converged() -> bool:
        if not set(load.devices) <= await path_names(rig.mediamtx):
            return False
        for device_id in load.devices.values():
            status = (await sense_api.request("GET", f"/v1/devices/{device_id}/reconcile-status")).json()
            if (
                status["status"] != "converged"
                or status["observed_generation"] != status["desired_generation"]
            ):
                return False
        return True

    await wait_until(
        converged,
        interval=0.5,
        timeout_seconds=CONVERGE_WITHIN_SECONDS,
        what=f"{scenario}: every device converged",
    )
    report = await examine_until_settled(
        env.root, wait_seconds=SETTLE_SECONDS, extra_secrets=load.witness.secrets
    )
    assert not report.findings, f"{scenario}: {Report(report.findings).text()}"
    in_sense, in_bell = await rig.facts_in_sense(), await rig.facts_in_bell()
    assert sorted(in_bell) == sorted(in_sense), f"{scenario}: Bell holds every Sense fact exactly once"
    await every_trigger_on_kafka(rig)
    aborted, read = await aborted_records_read(rig, env.topic(DEVICE_TOPIC))
    assert not aborted & read, (
        f"{scenario}: a read_committed consumer read aborted offsets {sorted(aborted & read)[:10]}"
    )
    stalls = {name: round(p.longest_stall, 1) for name, p in rig.pipelines.items()}
    print(
        f"{scenario}: {len(load.devices)} devices, {len(in_sense)} Sense facts, longest stalls {stalls} s, "
        f"{len(aborted)} aborted records in {DEVICE_TOPIC} (none read), "
        f"{load.sense.unanswered + load.signal.unanswered} requests so far sent again after an instance died"
    )
    assert all(stall <= STALL_LIMIT_SECONDS for stall in stalls.values()), f"{scenario}: stalled {stalls}"


async def every_trigger_on_kafka(rig: Rig) -> None:
    """Every trigger a recorded check made is on the trigger topic (copies allowed: read as a set)."""
    recorded: set[str] = set()
    for watcher_id in rig.load.watchers:
        page = (
            await rig.load.signal.request(
                "GET", f"/v1/signal-watchers/{watcher_id}/checks", params={"limit": 100}
            )
        ).json()
        recorded |= {item["trigger_id"] for item in page["items"] if item["trigger_id"]}
    assert recorded, "the load's checks made triggers"
    serde = AvroSerde(SchemaRegistry.load())
    on_kafka = {
        str(serde.decode(value).record["trigger_id"])
        for _, value in await read_committed(rig.cluster, rig.env.topic(TRIGGER_TOPIC))
    }
    assert recorded <= on_kafka, f"{len(recorded - on_kafka)} recorded triggers missing on the topic"


async def read_committed(cluster: KafkaCluster, topic: str) -> list[tuple[tuple[int, int], bytes]]:
    """Every record of `topic` as the services' consumers read it (read_committed): ((partition, offset),
    value)."""
    partitions = [TopicPartition(topic, p) for p in sorted(await leaders(cluster, topic))]
    consumer = plain_consumer(
        cluster.layout.bootstrap, client_id="ha-check", group_id=None, isolation_level="read_committed"
    )
    await consumer.start()
    try:
        consumer.assign(partitions)
        await seek_to_start(consumer, partitions)
        ends = await consumer.end_offsets(partitions)
        records: list[tuple[tuple[int, int], bytes]] = []
        while any([await consumer.position(tp) < ends[tp] for tp in partitions]):
            for messages in (await consumer.getmany(timeout_ms=1000)).values():
                records += [((m.partition, m.offset), m.value or b"") for m in messages]
        return records
    finally:
        await consumer.stop()


BATCH_LINE = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) .*?producerId: (-?\d+) .*?isTransactional: (\w+) isControl: (\w+)"
)
MARKER_LINE = re.compile(r"endTxnMarker: (COMMIT|ABORT)")


def aborted_offsets(segment_files: list[Path]) -> set[int]:
    """Offsets of data records in transactions ended by an ABORT marker, from the partition's log as Kafka's
    own DumpLogSegments prints it (independent of any client)."""
    if not segment_files:
        return set()
    dumped = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", f"{REPO_ROOT / '.local/kafka/libs'}/*",
         f"-Dlog4j2.configurationFile={REPO_ROOT / 'infra/kafka/tools-log4j2.xml'}",
         "org.apache.kafka.tools.DumpLogSegments", "--print-data-log",
         "--files", ",".join(map(str, segment_files))],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    open_batches: dict[int, list[range]] = {}
    aborted: set[int] = set()
    control_of: int | None = None
    for line in dumped.stdout.splitlines():
        if batch := BATCH_LINE.search(line):
            first, last, producer = int(batch[1]), int(batch[2]), int(batch[3])
            transactional, control = batch[4] == "true", batch[5] == "true"
            control_of = producer if control else None
            if transactional and not control:
                open_batches.setdefault(producer, []).append(range(first, last + 1))
        elif (marker := MARKER_LINE.search(line)) and control_of is not None:
            ended = open_batches.pop(control_of, [])
            if marker[1] == "ABORT":
                aborted |= {offset for batch_range in ended for offset in batch_range}
    return aborted


async def aborted_records_read(rig: Rig, topic: str) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(aborted records of `topic` in the log, records a read_committed consumer read), as (partition,
    offset)."""
    read = {position for position, _ in await read_committed(rig.cluster, topic)}
    aborted: set[tuple[int, int]] = set()
    for partition, leader in (await leaders(rig.cluster, topic)).items():
        folder = rig.cluster.layout.node(leader).data_dir / f"{topic}-{partition}"
        segments = sorted(folder.glob("*.log"))
        offsets = await asyncio.to_thread(aborted_offsets, segments)
        aborted |= {(partition, offset) for offset in offsets}
    return aborted, read


async def relay_coordinated_by(rig: Rig, node: Node) -> str | None:
    """A transactional id of a relay (Sense's first, then the other services') whose coordinator is
    `node`, or None."""
    led = await leaders(rig.cluster, "__transaction_state")
    names = KafkaNames(rig.env.kafka_prefix)
    for service in SERVICES_WITH_OUTBOX:
        schema = rig.env.service(service).schema
        assert schema is not None
        for shard in range(OUTBOX_SHARDS):
            txn_id = transactional_id(names, Identifier(schema), OUTBOX_TABLE, shard)
            if led[coordinator_partition(txn_id)] == node.node_id:
                return txn_id
    return None


async def test_a_leader_and_coordinator_kill_loses_nothing(rig: Rig) -> None:
    cluster = rig.cluster
    async with rig.watching(), rig.load.running():
        await asyncio.sleep(WARM_UP_SECONDS)
        victim = cluster.layout.node((await leaders(cluster, rig.env.topic(DEVICE_TOPIC)))[0])
        coordinated = await relay_coordinated_by(rig, victim)
        assert coordinated is not None, f"node {victim.node_id} coordinates no relay's transactions"
        await asyncio.to_thread(cluster.kill, victim)
        await asyncio.sleep(KILLED_SECONDS)
        cluster.start(victim)
        await rig.in_sync()
        await asyncio.sleep(WARM_UP_SECONDS)
    print(f"killed node {victim.node_id}: leader of {DEVICE_TOPIC}-0 and coordinator of {coordinated}")
    await invariants(rig, "leader kill")


async def test_a_rolling_restart_with_a_service_instance_killed_loses_nothing(rig: Rig) -> None:
    env, cluster = rig.env, rig.cluster
    async with rig.watching(), rig.load.running():
        await asyncio.sleep(WARM_UP_SECONDS)
        for n, node in enumerate(cluster.layout.nodes):
            await asyncio.to_thread(cluster.stop, node)
            if n == 0:
                for service in SERVICES:
                    await env.kill(f"{service}@2")
            cluster.start(node)
            await rig.in_sync()
            if n == 1:
                await env.start(*(f"{service}@2" for service in SERVICES))
        await asyncio.sleep(WARM_UP_SECONDS)
    await invariants(rig, "rolling restart")


async def test_a_zombie_broker_loses_nothing(rig: Rig) -> None:
    cluster = rig.cluster
    async with rig.watching(), rig.load.running():
        await asyncio.sleep(WARM_UP_SECONDS)
        zombie = cluster.layout.node((await leaders(cluster, rig.env.topic(DEVICE_TOPIC)))[0])
        cluster.send(zombie, signals.SIGSTOP)
        try:
            await asyncio.sleep(ZOMBIE_SECONDS)
        finally:
            cluster.send(zombie, signals.SIGCONT)
        await rig.in_sync()
        await asyncio.sleep(WARM_UP_SECONDS)
    await invariants(rig, "zombie broker")


async def test_the_log_check_finds_the_records_of_an_aborted_transaction(rig: Rig) -> None:
    """The aborted-record check above is only as good as its reading of the log: a transaction whose
    records reached the log and was then aborted, and one committed after it."""
    topic = f"ha-aborted.{uuid.uuid4().hex[:8]}.v1"
    await create_replicated_topic(rig.cluster, topic, partitions=1)

    def produce() -> None:
        producer = Producer(
            {"bootstrap.servers": rig.cluster.layout.bootstrap, "transactional.id": f"ha-check-{topic}"}
        )
        producer.init_transactions(30)
        for count, end in ((ABORTED_RECORDS, producer.abort_transaction), (3, producer.commit_transaction)):
            producer.begin_transaction()
            for n in range(count):
                producer.produce(topic, value=f"{n}".encode(), key=b"k")
            assert producer.flush(30) == 0, "every record reached the log before the transaction ended"
            end(30)

    await asyncio.to_thread(produce)
    aborted, read = await aborted_records_read(rig, topic)
    # offsets: the aborted records, the ABORT marker, the committed records, the COMMIT marker
    assert aborted == {(0, n) for n in range(ABORTED_RECORDS)}
    assert read == {(0, ABORTED_RECORDS + 1 + n) for n in range(3)}


async def test_services_started_while_every_broker_is_down_become_ready_by_themselves(rig: Rig) -> None:
    """The second instances start with no broker answering: each serves /healthz; the services that
    consume are not ready (their consumer cannot start), the others are (their APIs need PostgreSQL only:
    the outbox keeps their events); once the brokers are back every instance is ready without a restart,
    and the environment is healthy."""
    env, cluster = rig.env, rig.cluster
    second = [f"{service}@2" for service in SERVICES]
    await env.stop(*second)
    for node in cluster.layout.nodes:
        await asyncio.to_thread(cluster.kill, node)
    try:
        await env.start(*second)  # services.sh waits for each /healthz
        async with httpx.AsyncClient(timeout=10.0) as http:

            async def readiness() -> dict[str, int]:
                return {name: (await http.get(f"{env.url(name)}/readyz")).status_code for name in second}

            async def consumers_not_ready() -> bool:
                states = await readiness()
                return all((states[f"{s}@2"] == 503) == (s in CONSUMING_SERVICES) for s in SERVICES)

            await wait_until(
                consumers_not_ready,
                interval=0.5,
                timeout_seconds=60.0,
                what="the consuming instances not ready",
            )
            for node in cluster.layout.nodes:
                cluster.start(node)

            async def all_ready() -> bool:
                return set((await readiness()).values()) == {200}

            await wait_until(
                all_ready, interval=0.5, timeout_seconds=120.0, what="every instance ready by itself"
            )
    finally:
        for node in cluster.layout.nodes:
            cluster.start(node)
    await rig.in_sync()
    report = await examine_until_settled(
        env.root, wait_seconds=SETTLE_SECONDS, extra_secrets=rig.load.witness.secrets
    )
    assert not report.findings, Report(report.findings).text()


async def test_a_user_signs_in_through_the_second_console(rig: Rig) -> None:
    """A sign-in started at `console@2` comes back to it (the provider takes a loopback callback on any
    port, RFC 8252; its login and consent pages are the first console's) and its overview answers."""
    async with httpx.AsyncClient(base_url=rig.env.url("console@2"), timeout=20.0) as http:
        await signed_in_through_hydra(http, f"ha-{uuid.uuid4().hex[:6]}")
        overview = await http.get("/")
        assert overview.status_code == 200 and overview.url.host == "127.0.0.1"
        assert overview.url.port == rig.env.service("console@2").port
