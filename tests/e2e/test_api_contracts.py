"""The published OpenAPI documents tell the truth: schemathesis, with every check, against the live services.

Each document in schemas/openapi/ is loaded as committed (the drift tests keep it equal to what the code
serves) and run with schemathesis's engine (its Python API: the phases `schemathesis run` runs -- examples,
coverage, fuzzing and the stateful links between operations) against the service process of the e2e
environment, with a valid credential: an access token of the environment's own Hydra for that service,
signed in as `schemathesis-user` with every permission the service checks. Every check runs with
schemathesis's own defaults, as `schemathesis run --checks all` does: a
document either states a rule in JSON Schema or the service accepts what the schema allows (no vendor
extension tells the fuzzer what to leave out).

In `make test` the run is repeatable: the fixed `SEEDS`, `MAX_EXAMPLES` per operation and phase, no example
database. `make fuzz` runs one fresh seed (`YOVISION_FUZZ_SEED`, printed, replayed with `make fuzz
SEED=...`) with `FUZZ_EXAMPLES` per operation. Every failure of every check fails the test with
schemathesis's own description, a curl line and the seed to reproduce it.

The environment confines the watcher probe to loopback (`SIGNAL_PROBE_ONLY_NETWORKS`, tests/e2e/conftest.py):
the fuzzer creates watchers with any URL the schema allows and calls "test now", so no probe may leave
the machine.

Left out on purpose (docs/decisions.md, "Contracts that tell the truth"):
- media-worker's `POST /v1/admin/drain` is called with a token that lacks `media:drain`: drained, the
  worker refuses every later upload with 503 for the rest of the session's environment. Its permitted
  behaviour is covered by tests/integration/media_worker and tests/e2e/test_media.py.
- Bell's signed relay endpoint (`sense-audit-relay-v1`): positive cases are signed with the environment's
  relay key, as Sense signs them; negative ones are sent unsigned (refused either way).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis import Case
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema
from schemathesis.engine.recorder import CheckFailureInfo, ScenarioRecorder
from schemathesis.generation import GenerationMode
from schemathesis.hooks import HookContext
from schemathesis.schemas import BaseSchema

from tests.support.e2e_fixtures import E2E_SETTINGS, MEDIA_SERVERS, Witness, user_token
from tests.support.stack import Stack
from yovision_platform.audit_push import BATCH_PATH
from yovision_platform.security import KeyRing, sign_request
from yovision_platform.tools.devsecrets import AUDIT_PUSH_KEY_ID
from yovision_platform.tools.environment import LocalEnvironment, local_environment

OPENAPI_DIR = Path(__file__).resolve().parents[2] / "schemas" / "openapi"
SEEDS = (15, 20261201)
MAX_EXAMPLES = 25
FUZZ_SEED_VARIABLE = "YOVISION_FUZZ_SEED"
FUZZ_EXAMPLES_VARIABLE = "YOVISION_FUZZ_EXAMPLES"
FUZZ_EXAMPLES = 100
REQUEST_TIMEOUT_SECONDS = 20.0
# One run is mostly Hypothesis's CPU, several times slower while `make test` keeps both cores busy with
# other workers: a margin above the suite's 300 s default.
RUN_TIMEOUT_SECONDS = 900
# Every permission the APIs check, except media:drain (see the module docstring).
PERMISSIONS = ("sense:operate", "sense:read", "signal:read", "bell:audit-read", "orphan:read")


@pytest.fixture(scope="module")
async def env(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalEnvironment]:
    """An environment of this module's own (the conftest's `env` is overridden here): the fuzzing leaves
    devices, watchers, reports and uploads of every shape behind, which the other flows must never see."""
    root = tmp_path_factory.mktemp("contracts-env")
    async with local_environment(
        root, f"st-{uuid.uuid4().hex[:6]}", settings=E2E_SETTINGS, media_servers=MEDIA_SERVERS
    ) as environment:
        yield environment


@dataclass(frozen=True)
class Contract:
    service: str
    document: str
    credential: str  # "access-token": a user's token of the environment's Hydra; "none"


CONTRACTS = (
    Contract("sense-reconciler", "sense-reconciler.v1.json", "access-token"),
    Contract("orphan-scanner", "orphan-scanner.v1.json", "access-token"),
    Contract("bell-receiver", "bell-receiver.v1.json", "access-token"),
    Contract("bell-receiver", "sense-audit-relay-v1.json", "none"),
    Contract("signal-watcher", "signal-watcher.v1.json", "access-token"),
    Contract("media-worker", "media-worker.v1.json", "access-token"),
)


async def credential(env: LocalEnvironment, contract: Contract) -> str | None:
    if contract.credential == "access-token":
        return await user_token(env, contract.service, "schemathesis-user", *PERMISSIONS)
    return None


def audit_push_keyring(env: LocalEnvironment) -> KeyRing:
    """The key ring Sense signs its batches with, from Bell's env file (as devsecrets wrote it)."""
    files = json.loads(env.env_of("bell-receiver")["BELL_AUDIT_PUSH_KEY_FILES"])
    return KeyRing.from_key_files(files, "BELL_AUDIT_PUSH_KEY_FILES", active_key_id=AUDIT_PUSH_KEY_ID)


def sign_relay_batches(schema: BaseSchema, keyring: KeyRing) -> None:
    """Positive cases of the relay operation are signed as Sense signs them (key id, timestamp, fresh nonce,
    signature) over exactly the bytes `requests` serializes their body to. Negative cases stay as
    generated: a request the schema refuses must be refused, signed or not."""

    @schema.hook
    def map_case(context: HookContext, case: Case) -> Case:
        meta = case.meta
        if (
            case.operation.path != BATCH_PATH
            or meta is None
            or meta.generation.mode is not GenerationMode.POSITIVE
        ):
            return case
        body = json.dumps(case.body, allow_nan=False).encode()  # exactly what `requests` sends for it
        case.headers = {
            **(case.headers or {}),
            **sign_request(keyring, method="POST", path=BATCH_PATH, body=body, now=time.time()),
        }
        return case


@dataclass(frozen=True)
class Run:
    """One schemathesis run's randomness: a seed, the examples per operation and phase, and whether it runs
    the coverage phase. That phase enumerates each schema's boundaries (lengths, limits, every enum value,
    each required field left out), the same set whatever the seed, so `make test` runs it with the first
    seed only: repeated, it re-draws only the filler around the same boundaries. (Sense's source URI
    pattern is spelled so that the phase draws its 2048- and 2047-character URIs at once instead of
    searching Hypothesis's whole budget for each: sense_reconciler/domain/source_uri.py.)"""

    seed: int
    examples: int
    coverage: bool = True

    @property
    def replay(self) -> str:
        return f"make fuzz SEED={self.seed} EXAMPLES={self.examples}"


def runs() -> list[Run]:
    """`make fuzz`'s one seed (and examples) when it set them, else the fixed seeds of `make test`."""
    seed = os.environ.get(FUZZ_SEED_VARIABLE)
    if seed is not None:
        return [Run(int(seed), int(os.environ.get(FUZZ_EXAMPLES_VARIABLE, FUZZ_EXAMPLES)))]
    return [Run(seed, MAX_EXAMPLES, coverage=index == 0) for index, seed in enumerate(SEEDS)]


def run_schemathesis(
    document: Path, base_url: str, token: str | None, run: Run, keyring: KeyRing | None = None
) -> tuple[list[str], list[bytes]]:
    """Every failure and error of one schemathesis run (empty when the contract holds) and every
    response received (headers and body), for the secret check."""
    settings: dict[str, object] = {
        "seed": run.seed,
        "base-url": base_url,
        "request-timeout": REQUEST_TIMEOUT_SECONDS,
        "checks": {"enabled": True},  # every check, each with its default expectations
        "generation": {"max-examples": run.examples, "database": "none"},
    }
    if not run.coverage:
        settings["phases"] = {"coverage": {"enabled": False}}
    if token is not None:
        settings["headers"] = {"Authorization": f"Bearer {token}"}
    raw = json.loads(document.read_text(encoding="utf-8"))
    schema = schemathesis.openapi.from_dict(as_generated(raw), config=SchemathesisConfig.from_dict(settings))
    if keyring is not None:
        sign_relay_batches(schema, keyring)
    problems: list[str] = []
    responses: list[bytes] = []
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            recorder = event.recorder
            for interaction in recorder.interactions.values():
                if interaction.response is not None:
                    headers = "\n".join(
                        f"{k}: {', '.join(v)}" for k, v in interaction.response.headers.items()
                    )
                    responses.append(headers.encode() + b"\n" + interaction.response.content)
            if event.status is Status.FAILURE:
                for case_id, checks in recorder.checks.items():
                    for check in checks:
                        if check.failure_info is not None:
                            problems.append(describe(recorder, case_id, check.name, check.failure_info))
        elif isinstance(event, events.NonFatalError):
            problems.append(f"{event.label}: error: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            problems.append(f"fatal: {event.exception!r}")
    return sorted(set(problems)), responses


def as_generated(document: dict[str, Any]) -> dict[str, Any]:
    """The document with each discriminated `oneOf` written as a plain `anyOf`: the same set of values (the
    branches' discriminator constants exclude each other), which schemathesis can generate from (it
    reports the frozen relay contract's discriminated `oneOf` as unsatisfiable)."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        result = {key: rewrite(value) for key, value in node.items()}
        if "oneOf" in result and "discriminator" in result:
            del result["discriminator"]  # its mapping keys are text ("1"), the constants integers
            result["anyOf"] = result.pop("oneOf")
        return result

    rewritten: dict[str, Any] = rewrite(document)
    return rewritten


def describe(recorder: ScenarioRecorder, case_id: str, check: str, info: CheckFailureInfo) -> str:
    interaction = recorder.interactions.get(case_id)
    response = interaction.response if interaction is not None else None
    answer = f"{response.status_code} {response.content[:300]!r}" if response is not None else "no response"
    return (
        f"{recorder.label}: {check}: {info.failure.title}: {info.failure.message}\n"
        f"    answer: {answer}\n    {info.code_sample}"
    )


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
@pytest.mark.parametrize("run", runs(), ids=lambda r: f"seed-{r.seed}")
@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.document.removesuffix(".json"))
async def test_the_contract_holds_against_the_live_service(
    env: LocalEnvironment, witness: Witness, contract: Contract, run: Run
) -> None:
    token = await credential(env, contract)
    if token is not None:
        witness.secrets.add(token)
    keyring = audit_push_keyring(env) if contract.service == "bell-receiver" else None
    problems, responses = await asyncio.to_thread(
        run_schemathesis, OPENAPI_DIR / contract.document, env.url(contract.service), token, run, keyring
    )
    witness.responses.extend(responses)
    assert not problems, (
        f"{len(problems)} schemathesis findings with seed {run.seed} (replay: {run.replay}):\n"
        + "\n".join(problems)
    )
