"""The published OpenAPI documents tell the truth: schemathesis, with every check, against the live services.

Each document in schemas/openapi/ is loaded as committed (the drift tests keep it equal to what the code
serves) and run with schemathesis's engine (its Python API: the phases `schemathesis run` runs -- examples,
coverage, fuzzing and the stateful links between operations) against the service process of the e2e
environment, with a valid credential: Sense's operator token, or a JWT minted with the environment's dev
key. Deterministic (fixed seed, derandomized generation, no example database) and bounded
(`MAX_EXAMPLES` per operation and phase), so a run is repeatable and finishes in about a minute. Every
failure of every check fails the test with schemathesis's own description and a curl line to reproduce it.

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
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeGuard

import pytest
import schemathesis
from schemathesis import Case
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema
from schemathesis.engine.recorder import CheckFailureInfo, ScenarioRecorder
from schemathesis.generation import GenerationMode
from schemathesis.hooks import HookContext
from schemathesis.schemas import BaseSchema

from tests.conftest import Stack
from tests.e2e.conftest import E2E_SETTINGS, MEDIA_SERVERS, Witness, user_token
from yovision_platform.audit_relay.batch import BATCH_PATH
from yovision_platform.signing import KeyRing, sign_request
from yovision_platform.tools.devsecrets import BELL_RELAY_KEY_ID
from yovision_platform.tools.environment import (
    PROBE_CONFINEMENT_SETTING,
    TEST_PROBE_ONLY_NETWORKS,
    LocalEnvironment,
    local_environment,
)

OPENAPI_DIR = Path(__file__).resolve().parents[2] / "schemas" / "openapi"
SEED = 15
MAX_EXAMPLES = 25
REQUEST_TIMEOUT_SECONDS = 20.0
NEGATIVE_REFUSALS = [
    "400",
    "401",
    "403",
    "404",
    "405",
    "406",
    "409",
    "413",
    "415",
    "422",
    "428",
    "429",
    "5xx",
]
# Every permission the user-facing APIs check, except media:drain (see the module docstring).
PERMISSIONS = ("signal:read", "bell:audit-read", "orphan:read")


@pytest.fixture(scope="module")
async def env(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalEnvironment]:
    """An environment of this module's own (the conftest's `env` is overridden here): the fuzzing leaves
    devices, watchers, reports and uploads of every shape behind, which the other flows must never see."""
    root = tmp_path_factory.mktemp("contracts-env")
    async with local_environment(
        root, f"st-{uuid.uuid4().hex[:6]}", settings=E2E_SETTINGS, media_servers=MEDIA_SERVERS
    ) as environment:
        # the fuzzing creates watchers of every shape: none of their probes may leave the machine
        assert environment.env_of("signal-watcher")[PROBE_CONFINEMENT_SETTING] == TEST_PROBE_ONLY_NETWORKS
        yield environment


@dataclass(frozen=True)
class Contract:
    service: str
    document: str
    credential: str  # "operator": Sense's static token; "jwt": a minted user token; "none"


CONTRACTS = (
    Contract("sense-reconciler", "sense-reconciler.v1.json", "operator"),
    Contract("orphan-scanner", "orphan-scanner.v1.json", "jwt"),
    Contract("bell-receiver", "bell-receiver.v1.json", "jwt"),
    Contract("bell-receiver", "sense-audit-relay-v1.json", "none"),
    Contract("signal-watcher", "signal-watcher.v1.json", "jwt"),
    Contract("media-worker", "media-worker.v1.json", "jwt"),
)


def credential(env: LocalEnvironment, contract: Contract) -> str | None:
    if contract.credential == "operator":
        return env.secret_file(contract.service, "API_TOKEN_FILE").read_text().strip()
    if contract.credential == "jwt":
        return user_token(env, contract.service, "schemathesis-user", *PERMISSIONS)
    return None


def relay_keyring(env: LocalEnvironment) -> KeyRing:
    """The key ring Sense signs its batches with, from Bell's env file (as devsecrets wrote it)."""
    files = json.loads(env.env_of("bell-receiver")["BELL_RELAY_KEY_FILES"])
    return KeyRing.from_key_files(files, "BELL_RELAY_KEY_FILES", active_key_id=BELL_RELAY_KEY_ID)


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


def run_schemathesis(
    document: Path, base_url: str, token: str | None, keyring: KeyRing | None = None
) -> tuple[list[str], list[bytes]]:
    """Every failure and error of one schemathesis run (empty when the contract holds) and every
    response received (headers and body), for the secret check."""
    settings: dict[str, object] = {
        "seed": SEED,
        "base-url": base_url,
        "request-timeout": REQUEST_TIMEOUT_SECONDS,
        # Every check; a refusal of invalid input may also be 413 (a size the server refuses: Content Too
        # Large), which the check's default list leaves out (docs/decisions.md).
        "checks": {"enabled": True, "negative_data_rejection": {"expected-statuses": NEGATIVE_REFUSALS}},
        "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
    }
    if token is not None:
        settings["headers"] = {"Authorization": f"Bearer {token}"}
    raw = json.loads(document.read_text(encoding="utf-8"))
    schema = schemathesis.openapi.from_dict(as_generated(raw), config=SchemathesisConfig.from_dict(settings))
    honour_stated_rules(schema)
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


def honour_stated_rules(schema: BaseSchema) -> None:
    """Generate only requests within the rules the documents state beyond JSON Schema (vendor extensions of
    `yovision_platform.web`: `x-ordered-parameters`, `x-consistent-by`, `x-max-ratio`). The refusals they
    name are tested in the services' own tests."""
    components = schema.raw_schema.get("components", {}).get("schemas", {})

    @schema.hook
    def filter_case(context: HookContext, case: Case) -> bool:
        operation = context.operation.definition.raw if context.operation else {}
        return _within_parameter_rules(operation, case.query or {}) and _within_body_rules(
            operation, case.body, components
        )


def _within_parameter_rules(operation: dict[str, Any], query: dict[str, Any]) -> bool:
    for rule in operation.get("x-ordered-parameters", []):
        low, high = (query.get(name) for name in rule["parameters"])
        if isinstance(low, str) and isinstance(high, str) and not _before(low, high):
            return False
    return True


def _within_body_rules(operation: dict[str, Any], body: Any, components: dict[str, Any]) -> bool:
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = content.get("schema", {}).get("$ref", "")
    body_schema = components.get(ref.rsplit("/", 1)[-1], {})
    ratio = body_schema.get("x-max-ratio")
    if ratio and isinstance(body, dict):
        top, bottom = body.get(ratio["numerator"]), body.get(ratio["denominator"])
        if _positive(top) and _positive(bottom) and -(-top // bottom) > ratio["maximum"]:
            return False
    properties = body_schema.get("properties", {})
    for name, property_schema in properties.items():
        rule = property_schema.get("x-consistent-by")
        items = body.get(name) if rule and isinstance(body, dict) else None
        if isinstance(items, list):
            seen: dict[str, Any] = {}
            for item in items:
                if isinstance(item, dict) and seen.setdefault(str(item.get(rule["key"])), item) != item:
                    return False
    return True


def _positive(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _before(low: str, high: str) -> bool:
    try:
        return datetime.fromisoformat(low) < datetime.fromisoformat(high)
    except (TypeError, ValueError):
        return True  # not a date-time: a request the schema refuses anyway


def describe(recorder: ScenarioRecorder, case_id: str, check: str, info: CheckFailureInfo) -> str:
    interaction = recorder.interactions.get(case_id)
    response = interaction.response if interaction is not None else None
    answer = f"{response.status_code} {response.content[:300]!r}" if response is not None else "no response"
    return (
        f"{recorder.label}: {check}: {info.failure.title}: {info.failure.message}\n"
        f"    answer: {answer}\n    {info.code_sample}"
    )


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.document.removesuffix(".json"))
async def test_the_contract_holds_against_the_live_service(
    env: LocalEnvironment, witness: Witness, contract: Contract
) -> None:
    token = credential(env, contract)
    if token is not None:
        witness.secrets.add(token)
    keyring = relay_keyring(env) if contract.service == "bell-receiver" else None
    problems, responses = await asyncio.to_thread(
        run_schemathesis, OPENAPI_DIR / contract.document, env.url(contract.service), token, keyring
    )
    witness.responses.extend(responses)
    assert not problems, f"{len(problems)} schemathesis findings:\n" + "\n".join(problems)
