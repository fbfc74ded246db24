"""The read API on the fakes: the use cases (newest first, keyset pages, the newest complete report, one by
id) and the routes over HTTP in process (errors as problem details with their codes), with the access tokens
of an in-process issuer (`LocalIssuer`). (Served over real HTTP from PostgreSQL:
tests/integration/orphan_scanner/test_read_api.py; by the service process with Hydra's tokens:
test_processes.py there.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from orphan_scanner.domain.errors import ReportNotFound, ScanFailed
from orphan_scanner.entrypoints.api import mount_api
from orphan_scanner.entrypoints.http_reports import READ_PERMISSION
from orphan_scanner.service_layer.reports import Reports
from orphan_scanner.settings import AUDIENCE
from tests.support.issuers import LocalIssuer
from tests.support.orphan_world import World, world
from tests.support.stack import problem_code
from yovision_platform.web import AUDIENCES, PERMISSIONS, create_app, use_access_token_verifier


async def three_reports(w: World) -> list[uuid.UUID]:
    """Newest first: complete, failed, complete."""
    await w.stale("stale-1")
    w.mediamtx.paths |= {"stale-1", *(f"hand-{i}" for i in range(9))}
    oldest = (await w.report()).scan_id
    w.mediamtx.unreachable = True
    with pytest.raises(ScanFailed, match="mediamtx_unreachable"):
        await w.report()
    (failed,) = set(w.db.reports.scans) - {oldest}
    w.mediamtx.unreachable = False
    newest = (await w.report()).scan_id
    for minutes, scan_id in enumerate((newest, failed, oldest)):
        w.db.reports.age(scan_id, timedelta(minutes=minutes))
    return [newest, failed, oldest]


@pytest.fixture
def queries_world() -> tuple[World, Reports]:
    w = world()
    return w, w.use_cases.reports


async def test_pages_go_newest_first_and_end_without_a_next_position(
    queries_world: tuple[World, Reports],
) -> None:
    w, queries = queries_world
    made = await three_reports(w)
    first = await queries.page(2, None)
    assert [r.scan_id for r in first.items] == made[:2]
    assert first.next_after is not None and first.next_after.scan_id == made[1]
    rest = await queries.page(2, first.next_after)
    assert [r.scan_id for r in rest.items] == made[2:]
    assert rest.next_after is None
    exact = await queries.page(3, None)  # a full last page has no next position either
    assert len(exact.items) == 3 and exact.next_after is None


async def test_the_latest_is_the_newest_complete_report(queries_world: tuple[World, Reports]) -> None:
    w, queries = queries_world
    with pytest.raises(ReportNotFound):
        await queries.latest()
    made = await three_reports(w)
    assert (await queries.latest()).scan_id == made[0]
    assert (await queries.get(made[1])).status == "failed"
    with pytest.raises(ReportNotFound) as missing:
        await queries.get(uuid.uuid4())
    assert (missing.value.code, missing.value.status) == ("not_found", 404)


@pytest.fixture(scope="module")
def issuer() -> LocalIssuer:
    return LocalIssuer()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
async def api(
    queries_world: tuple[World, Reports], issuer: LocalIssuer
) -> AsyncIterator[tuple[World, httpx.AsyncClient, dict[str, str]]]:
    w, _ = queries_world
    verifier = issuer.verifier(AUDIENCE)
    app = create_app("orphan-scanner", "test")
    use_access_token_verifier(app, verifier)
    mount_api(app, use_cases=w.use_cases)
    headers = bearer(issuer.token("operator", READ_PERMISSION, audience=AUDIENCE))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://orphan.test") as http:
        yield w, http, headers
    await verifier.keys.aclose()
    await verifier.keys.http.aclose()


async def test_the_routes_answer_each_refusal_with_its_problem_code(
    api: tuple[World, httpx.AsyncClient, dict[str, str]],
) -> None:
    w, http, headers = api
    latest = await http.get("/v1/reports/latest", headers=headers)
    assert (latest.status_code, problem_code(latest)) == (404, "not_found")
    made = await three_reports(w)
    page = (await http.get("/v1/reports", params={"limit": 1}, headers=headers)).json()
    assert [i["scan_id"] for i in page["items"]] == [str(made[0])]
    rest = (
        await http.get("/v1/reports", params={"limit": 5, "cursor": page["next_cursor"]}, headers=headers)
    ).json()
    assert [i["scan_id"] for i in rest["items"]] == [str(s) for s in made[1:]] and rest["next_cursor"] is None
    bad = await http.get("/v1/reports", params={"cursor": "@@"}, headers=headers)
    assert (bad.status_code, problem_code(bad)) == (400, "invalid_cursor")
    unknown = await http.get(f"/v1/reports/{uuid.uuid4()}", headers=headers)
    assert (unknown.status_code, problem_code(unknown)) == (404, "not_found")
    found = (await http.get(f"/v1/reports/{made[2]}", headers=headers)).json()
    assert (found["scan_id"], found["counts"]["owned_stale"]) == (str(made[2]), 1)
    assert (await http.get("/v1/reports")).status_code == 401


@pytest.mark.parametrize(
    ("path", "served"),
    [("/v1/reports", 200), ("/v1/reports/latest", 404), (f"/v1/reports/{uuid.UUID(int=1)}", 404)],
)
async def test_every_route_refuses_another_services_token_and_a_token_without_orphan_read(
    api: tuple[World, httpx.AsyncClient, dict[str, str]], issuer: LocalIssuer, path: str, served: int
) -> None:
    """`served`: the answer to an accepted token on an empty store (so only the token decides the rest)."""
    _, http, headers = api
    others = [audience for audience in AUDIENCES if audience != AUDIENCE]
    # every permission, orphan:read included: the audience alone must refuse it
    foreign = await http.get(path, headers=bearer(await issuer.user_token("operator", PERMISSIONS, others)))
    assert (foreign.status_code, problem_code(foreign)) == (401, "unauthorized")
    assert foreign.headers["www-authenticate"] == "Bearer"
    lacking_token = issuer.token(
        "operator", *(p for p in PERMISSIONS if p != READ_PERMISSION), audience=AUDIENCE
    )
    lacking = await http.get(path, headers=bearer(lacking_token))
    assert (lacking.status_code, problem_code(lacking)) == (403, "forbidden")
    machine = await issuer.machine_token("operator-cli", [READ_PERMISSION], [AUDIENCE])
    assert (await http.get(path, headers=bearer(machine))).status_code == served
    assert (await http.get(path, headers=headers)).status_code == served
