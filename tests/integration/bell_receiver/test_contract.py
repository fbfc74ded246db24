"""The published OpenAPI documents are exactly what the app declares, and the app behaves as they say.

Regenerate after an intended change of the service document with
`BELL_WRITE_OPENAPI=1 .venv/bin/pytest tests/integration/bell_receiver/test_contract.py`. The relay contract
is frozen: its digest is pinned below, and a change to it means publishing sense-audit-relay-v2.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

from bell_receiver.entrypoints.api import audit_batch_contract, openapi_document
from tests.support.audit_push_client import fact
from tests.support.bell_receiver_fixtures import Served
from yovision_platform.audit_push import BatchResult, ErrorBody

OPENAPI_DIR = Path(__file__).resolve().parents[3] / "schemas" / "openapi"
SERVICE_FILE = OPENAPI_DIR / "bell-receiver.v1.json"
RELAY_FILE = OPENAPI_DIR / "sense-audit-relay-v1.json"
FROZEN_RELAY_SHA256 = "752acb04a27ae929fad53a6bf646697b52874bb978f3bc3f438b4f0a96559032"


def rendered(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def current_documents() -> dict[Path, str]:
    service = openapi_document(importlib.metadata.version("bell-receiver"))
    return {SERVICE_FILE: rendered(service), RELAY_FILE: rendered(audit_batch_contract(service))}


def test_published_openapi_files_match_the_app() -> None:
    documents = current_documents()
    if os.environ.get("BELL_WRITE_OPENAPI") == "1":
        for path, text in documents.items():
            path.write_text(text, encoding="utf-8")
    for path, text in documents.items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} differs from the app"


def test_the_relay_contract_is_frozen() -> None:
    digest = hashlib.sha256(RELAY_FILE.read_bytes()).hexdigest()
    assert digest == FROZEN_RELAY_SHA256, (
        "sense-audit-relay-v1 is frozen: publish sense-audit-relay-v2 instead"
    )


def test_the_contract_states_the_limits_the_app_enforces() -> None:
    contract = json.loads(RELAY_FILE.read_text())
    assert contract["x-limits"] == {
        "max_body_bytes": 1048576,
        "min_items": 1,
        "max_items": 100,
        "request_deadline_seconds": 10.0,
        "max_clock_skew_seconds": 300,
        "nonce_receipt_ttl_seconds": 600,
    }
    batch = contract["components"]["schemas"]["AuditEventBatch"]
    assert (batch["properties"]["items"]["minItems"], batch["properties"]["items"]["maxItems"]) == (1, 100)
    v1 = contract["components"]["schemas"]["DeviceAuditFactV1"]
    v2 = contract["components"]["schemas"]["DeviceAuditFactV2"]
    assert set(v2["required"]) - set(v1["required"]) == {"config_version"}
    assert set(v2["properties"]) - set(v1["properties"]) == {"config_version", "correlation_id"}
    assert v1["additionalProperties"] is False and v2["additionalProperties"] is False
    headers = [p["name"] for p in contract["paths"]["/internal/v1/audit-events:batch"]["post"]["parameters"]]
    assert headers == [
        "X-Yovision-Key-Id",
        "X-Yovision-Timestamp",
        "X-Yovision-Nonce",
        "X-Yovision-Signature",
    ]


async def test_every_answer_of_the_running_app_is_one_the_contract_declares(served: Served) -> None:
    contract = json.loads(RELAY_FILE.read_text())
    declared = contract["paths"]["/internal/v1/audit-events:batch"]["post"]["responses"]
    ok = await served.relay.post_items([fact(), fact(2), {"schema_version": 1}])
    refused = await served.relay.post_raw(b"{}", headers={"X-Yovision-Key-Id": "x"})
    invalid = await served.relay.post_raw(b"[]")
    for response in (ok, refused, invalid):
        assert str(response.status_code) in declared
        assert response.headers["content-type"] == "application/json"
    BatchResult.model_validate_json(ok.content)  # the contract's 200 schema is generated from this model
    ErrorBody.model_validate_json(refused.content)
    ErrorBody.model_validate_json(invalid.content)
    served_document = (await served.relay.http.get("/openapi.json")).json()
    assert (
        served_document["paths"]["/internal/v1/audit-events:batch"]
        == contract["paths"]["/internal/v1/audit-events:batch"]
    )
