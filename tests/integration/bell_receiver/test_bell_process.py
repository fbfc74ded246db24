"""Bell as a real server process: start-up refusals, health, the signed push end to end, a SIGKILL restart
that keeps replay answers byte-for-byte, the read APIs with the access tokens of a real Hydra (the session's
`hydra`, Bell's `BELL_AUTH_ISSUER`), clean SIGTERM, and no secret in any log line or response."""

from __future__ import annotations

import json
import signal

import httpx
import pytest

from bell_receiver.entrypoints.http_audit import AUDIT_READ_PERMISSION
from bell_receiver.settings import AUDIENCE
from tests.support.audit_push_client import RelayClient, batch_body, fact
from tests.support.bell_process import BellProcess, bell, wait_healthy
from tests.support.bell_receiver_fixtures import Keys
from tests.support.issuers import HydraIssuer
from tests.support.kafka import wait_until
from tests.support.stack import problem_code
from yovision_platform.web import AUDIENCES, PERMISSIONS

__all__ = ["bell"]  # the fixture, from tests/support/bell_process.py


@pytest.mark.parametrize(
    "missing", ["BELL_DATABASE_DSN_FILE", "BELL_AUDIT_PUSH_KEY_FILES", "BELL_AUTH_ISSUER"]
)
def test_refuses_to_start_without_dsn_keys_or_issuer(bell: BellProcess, missing: str) -> None:
    env = {k: v for k, v in bell.env.items() if k != missing}
    result = bell.run("serve", env=env)
    assert result.returncode == 2
    assert missing in result.stderr


async def test_the_signed_push_end_to_end_across_a_sigkill_restart(
    bell: BellProcess, keys: Keys, hydra: HydraIssuer
) -> None:
    migrated = bell.run("migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert json.loads(migrated.stdout)["applied"][-1] == "service/0004_audit_trace_id"
    bell.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bell.port}", timeout=10) as http:
        await wait_healthy(http, bell)

        async def ready() -> bool:
            return (await http.get("/readyz")).status_code == 200

        await wait_until(ready, timeout_seconds=30)
        checks = (await http.get("/readyz")).json()["checks"]
        assert {"database", "worker:audit-ingest", "worker:receipt-purge"} <= set(checks)

        relay = RelayClient(http, keys.signing_ring)
        body = batch_body([fact(), fact(2), {**fact(), "token": "s3cr3t-field-value"}])
        headers = relay.sign(body)
        first = await relay.post_raw(body, headers=headers)
        assert first.status_code == 200
        assert [r["status"] for r in first.json()["results"]] == ["accepted", "accepted", "rejected"]

        assert bell.stop(signal.SIGKILL) == -signal.SIGKILL
        bell.start()
        await wait_healthy(http, bell)
        again = await relay.post_raw(body, headers=headers)
        assert again.status_code == 200 and again.content == first.content
        conflict = await relay.post_items([fact()], nonce=headers["X-Yovision-Nonce"])
        assert conflict.status_code == 409
        refused = await relay.post_raw(body, headers={**headers, "X-Yovision-Signature": "v1=" + "0" * 64})
        assert refused.status_code == 401

        tokens, read = await read_apis_take_hydras_tokens(http, hydra)

        metrics = (await http.get("/metrics")).text
        assert 'bell_audit_push_requests_total{outcome="replayed"} 1.0' in metrics
        assert 'bell_audit_push_signature_rejections_total{reason="signature_mismatch"} 1.0' in metrics
        assert 'access_token_refusals_total{reason="invalid"} 1.0' in metrics
        responses = first.text + again.text + conflict.text + refused.text + read + metrics
    assert bell.stop(signal.SIGTERM) == 0
    log_text = bell.log_path.read_text()
    for secret in (keys.relay_hex, bell.password, headers["X-Yovision-Signature"][3:], *tokens):
        assert secret not in log_text and secret not in responses
    assert "s3cr3t-field-value" not in log_text + responses
    assert '"msg":"relay batch handled"' in log_text


async def read_apis_take_hydras_tokens(http: httpx.AsyncClient, hydra: HydraIssuer) -> tuple[list[str], str]:
    """Bell's read APIs, through the entrypoint's verifier, with Hydra's tokens: a token for every other
    audience is the uniform 401, one without `bell:audit-read` a 403 on the trail (and still its own inbox),
    and the trail names the actor each fact carried, never the reader. Returns the tokens and the answers."""
    others = [audience for audience in AUDIENCES if audience != AUDIENCE]
    foreign = await hydra.user_token("auditor", PERMISSIONS, others)
    lacking = await hydra.user_token(
        "auditor", [p for p in PERMISSIONS if p != AUDIT_READ_PERMISSION], [AUDIENCE]
    )
    auditor = await hydra.machine_token("operator-cli", [AUDIT_READ_PERMISSION], [AUDIENCE])

    def bearer(token: str) -> dict[str, str]:
        return {"authorization": f"Bearer {token}"}

    refused = await http.get("/v1/notifications", headers=bearer(foreign))
    assert (refused.status_code, problem_code(refused)) == (401, "unauthorized")
    forbidden = await http.get("/v1/audit-events", headers=bearer(lacking))
    assert (forbidden.status_code, problem_code(forbidden)) == (403, "forbidden")
    inbox = await http.get("/v1/notifications", headers=bearer(lacking))
    assert (inbox.status_code, inbox.json()) == (200, {"items": [], "next_cursor": None})
    trail = await http.get("/v1/audit-events", params={"source_system": "sense"}, headers=bearer(auditor))
    assert trail.status_code == 200
    assert [item["actor"] for item in trail.json()["items"]] == ["operator:alice", "operator:alice"]
    answers = refused.text + forbidden.text + inbox.text + trail.text
    return [foreign, lacking, auditor], answers
