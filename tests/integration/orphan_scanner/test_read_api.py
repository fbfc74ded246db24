"""The read API of scan reports over real HTTP: the report a scan stored, its gate arithmetic and the exact
apply command the CLI prints; an access token (of the in-process `LocalIssuer`) with `orphan:read`; keyset
paging of the report list."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from orphan_scanner.entrypoints.api import mount_api
from orphan_scanner.entrypoints.cli import report_document
from orphan_scanner.entrypoints.http_reports import READ_PERMISSION
from orphan_scanner.settings import AUDIENCE
from tests.support.issuers import LocalIssuer
from tests.support.orphan_scanner_fixtures import Orphan
from tests.support.served_app import serve_app
from tests.support.stack import problem_code
from yovision_platform.web import create_app, use_access_token_verifier


@pytest.fixture
async def api(orphan: Orphan) -> AsyncIterator[tuple[httpx.AsyncClient, LocalIssuer]]:
    issuer = LocalIssuer()
    verifier = issuer.verifier(AUDIENCE)
    app = create_app("orphan-scanner", "test")
    use_access_token_verifier(app, verifier)
    mount_api(app, use_cases=orphan.components.use_cases)
    async with serve_app(app) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        yield http, issuer
    await verifier.keys.aclose()
    await verifier.keys.http.aclose()


def bearer(issuer: LocalIssuer, subject: str, *permissions: str) -> dict[str, str]:
    return {"authorization": f"Bearer {issuer.token(subject, *permissions, audience=AUDIENCE)}"}


async def test_the_latest_report_shows_classes_gate_arithmetic_and_the_cli_command(
    orphan: Orphan, api: tuple[httpx.AsyncClient, LocalIssuer]
) -> None:
    http, issuer = api
    headers = bearer(issuer, "operator", READ_PERMISSION)
    assert (await http.get("/v1/reports/latest", headers=headers)).status_code == 404
    await orphan.feed.stale("old-cam")
    await orphan.feed.live("live-cam")
    await orphan.mediamtx.add_many(["old-cam", "live-cam", *[f"hand-{i}" for i in range(8)]])
    first = await orphan.fresh_report()
    scan = await orphan.fresh_report()

    latest = (await http.get("/v1/reports/latest", headers=headers)).json()
    cli = report_document(scan)
    assert latest["scan_id"] == cli["scan_id"]
    assert latest["counts"] == cli["counts"] == {"observed": 10, "in_use": 1, "owned_stale": 1, "unowned": 8}
    assert latest["apply_command"] == cli["apply"] and latest["confirm"] == cli["confirm"]
    assert [c["path_name"] for c in latest["candidates"]] == ["old-cam"]
    located = [{k: c[k] for k in ("media_server_id", "path_name")} for c in latest["candidates"]]
    assert located == cli["candidates"]
    assert latest["unowned"] == cli["unowned"]
    gate = latest["gate"]
    assert (gate["ratio_left"], gate["ratio_right"], gate["ratio_ok"]) == (100, 100, True)
    assert (gate["count_ok"], gate["expired"], gate["allowed"], gate["reason_code"]) == (
        True,
        False,
        True,
        None,
    )
    assert gate["servers"] == [
        {
            "media_server_id": "default",
            "candidates": 1,
            "total": 10,
            "ratio_left": 100,
            "ratio_right": 100,
            "ratio_ok": True,
        }
    ]
    assert 0 < latest["seconds_left"] <= 15 * 60

    by_id = (await http.get(f"/v1/reports/{first.scan_id}", headers=headers)).json()
    assert by_id["scan_id"] == str(first.scan_id)
    page = (await http.get("/v1/reports", params={"limit": 1}, headers=headers)).json()
    assert [i["scan_id"] for i in page["items"]] == [str(scan.scan_id)]
    rest = await http.get("/v1/reports", params={"limit": 1, "cursor": page["next_cursor"]}, headers=headers)
    assert [i["scan_id"] for i in rest.json()["items"]] == [str(first.scan_id)]
    assert rest.json()["next_cursor"] is None


async def test_the_read_api_needs_the_permission_and_refuses_bad_input(
    orphan: Orphan, api: tuple[httpx.AsyncClient, LocalIssuer]
) -> None:
    http, issuer = api
    assert (await http.get("/v1/reports")).status_code == 401
    other = await http.get("/v1/reports", headers=bearer(issuer, "u", "signal:read"))
    assert (other.status_code, problem_code(other)) == (403, "forbidden")
    headers = bearer(issuer, "operator", READ_PERMISSION)
    for limit, status in ((0, 422), (1, 200), (100, 200), (101, 422)):
        assert (await http.get("/v1/reports", params={"limit": limit}, headers=headers)).status_code == status
    bad = await http.get("/v1/reports", params={"cursor": "@@"}, headers=headers)
    assert (bad.status_code, problem_code(bad)) == (400, "invalid_cursor")
    unknown = await http.get("/v1/reports/00000000-0000-4000-8000-000000000000", headers=headers)
    assert (unknown.status_code, problem_code(unknown)) == (404, "not_found")
    assert (await http.get("/v1/reports/not-a-uuid", headers=headers)).status_code == 422
