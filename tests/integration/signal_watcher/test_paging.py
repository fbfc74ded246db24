"""Keyset paging of the watcher list, the admin list and the check log: every row exactly once across pages,
rows that share a timestamp included (rows written in one transaction share `now()`), `next_cursor` null
exactly at the end, the limits of `limit`, `cursor` and `offset`, and `offset` after a cursor."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from signal_watcher.adapters.unit_of_work import PostgresUnitsOfWork
from signal_watcher.domain.model import CompareMode, Method, WatcherSpec
from signal_watcher.domain.records import CheckRow
from signal_watcher.entrypoints.api import PAGE_MAX_ITEMS
from tests.integration.signal_watcher.test_api import ALICE, BOB, api, auth
from tests.support.stack import problem_code
from yovision_platform.web import MAX_CURSOR_CHARS, encode_cursor

__all__ = ["api"]

ADMIN = auth("admin", "signal:read")
SPEC = WatcherSpec(
    "w", "agent-1", "http://fixture.example.com/", Method.GET, (), None, 60, CompareMode.HASH, None, "{diff}"
)


async def _insert_watchers(units: PostgresUnitsOfWork, user: str, count: int) -> list[str]:
    """`count` watchers of `user` created in one transaction: all share one created_at."""
    async with units() as uow:
        return [str((await uow.watchers.insert(user, SPEC)).id) for _ in range(count)]


async def _walk(api: httpx.AsyncClient, path: str, headers: Mapping[str, str], limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        response = await api.get(path, params=params, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([item["id"] for item in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "paging does not end"


@pytest.mark.parametrize(("count", "pages"), [(4, [4]), (5, [5]), (6, [5, 1]), (11, [5, 5, 1])])
async def test_the_watcher_list_walks_every_row_once_and_ends_exactly(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork, count: int, pages: list[int]
) -> None:
    ids = await _insert_watchers(units, "alice", count)
    await _insert_watchers(units, "bob", 3)
    walked = await _walk(api, "/v1/signal-watchers", ALICE, limit=5)
    assert [len(p) for p in walked] == pages
    assert [i for p in walked for i in p] == sorted(ids)  # ties on created_at broken by id, ascending


async def test_the_admin_list_walks_every_users_rows_once(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork
) -> None:
    first = await _insert_watchers(units, "alice", 3)
    second = await _insert_watchers(units, "bob", 4)  # a later transaction: a later created_at
    walked = await _walk(api, "/v1/admin/signal-watchers", ADMIN, limit=2)
    assert [len(p) for p in walked] == [2, 2, 2, 1]
    assert [i for p in walked for i in p] == sorted(first) + sorted(second)
    assert (await api.get("/v1/admin/signal-watchers", headers=ALICE)).status_code == 403


async def test_the_check_log_walks_newest_first_across_equal_timestamps(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork
) -> None:
    [watcher] = await _insert_watchers(units, "alice", 1)
    base = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    moments = [base, base, base + timedelta(microseconds=1), base + timedelta(seconds=1), base]
    async with units() as uow:
        for moment in moments:
            await uow.checks.insert(
                CheckRow(uuid.uuid4(), uuid.UUID(watcher), moment, 200, "h", False, None, None, 5, None)
            )
    walked = await _walk(api, f"/v1/signal-watchers/{watcher}/checks", ALICE, limit=2)
    assert [len(p) for p in walked] == [2, 2, 1]
    flat = [i for p in walked for i in p]
    assert len(set(flat)) == len(moments)
    expected = await units.pool.fetch(
        f"SELECT id FROM {units.schema.quoted}.checks ORDER BY checked_at DESC, id DESC"
    )
    assert flat == [str(r["id"]) for r in expected]


async def test_bobs_cursor_pages_only_bobs_watchers(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork
) -> None:
    await _insert_watchers(units, "alice", 3)
    bobs = await _insert_watchers(units, "bob", 3)
    page = (await api.get("/v1/signal-watchers", params={"limit": 1}, headers=BOB)).json()
    rest = (
        await api.get("/v1/signal-watchers", params={"limit": 10, "cursor": page["next_cursor"]}, headers=BOB)
    ).json()
    assert [w["id"] for w in page["items"] + rest["items"]] == sorted(bobs)


@pytest.mark.parametrize(
    ("path", "headers"),
    [("/v1/signal-watchers", ALICE), ("/v1/admin/signal-watchers", ADMIN), ("/checks", ALICE)],
)
async def test_paging_limits_are_enforced_before_any_query(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork, path: str, headers: Mapping[str, str]
) -> None:
    if path == "/checks":
        [watcher] = await _insert_watchers(units, "alice", 1)
        path = f"/v1/signal-watchers/{watcher}/checks"
    valid = encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), uuid.uuid4())
    cases: list[tuple[dict[str, Any], int, str | None]] = [
        ({"limit": 0}, 422, "invalid_request"),
        ({"limit": 1}, 200, None),
        ({"limit": PAGE_MAX_ITEMS}, 200, None),
        ({"limit": PAGE_MAX_ITEMS + 1}, 422, "invalid_request"),
        ({"cursor": valid}, 200, None),
        ({"cursor": valid, "offset": 0}, 200, None),
        ({"cursor": valid, "offset": 1}, 200, None),  # both together: skip after the cursor's position
        ({"cursor": "not a cursor"}, 400, "invalid_cursor"),
        ({"cursor": encode_cursor(datetime(2026, 1, 1, tzinfo=UTC), 7)}, 400, "invalid_cursor"),  # int key
        ({"cursor": "A" * MAX_CURSOR_CHARS}, 400, "invalid_cursor"),
        ({"cursor": "A" * (MAX_CURSOR_CHARS + 1)}, 422, "invalid_request"),
        ({"offset": 1_000_000}, 200, None),
        ({"offset": 1_000_001}, 422, "invalid_request"),
    ]
    for params, status, code in cases:
        response = await api.get(path, params=params, headers=headers)
        assert response.status_code == status, (params, response.text)
        if code is not None:
            assert problem_code(response) == code, params
            assert "not a cursor" not in response.text  # no input echoed


async def test_offset_still_pages_and_offers_a_cursor(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork
) -> None:
    ids = sorted(await _insert_watchers(units, "alice", 5))
    page = (await api.get("/v1/signal-watchers", params={"limit": 2, "offset": 1}, headers=ALICE)).json()
    assert [w["id"] for w in page["items"]] == ids[1:3]
    assert (page["limit"], page["offset"]) == (2, 1)
    rest = (
        await api.get("/v1/signal-watchers", params={"cursor": page["next_cursor"]}, headers=ALICE)
    ).json()
    assert [w["id"] for w in rest["items"]] == ids[3:]
    assert rest["next_cursor"] is None


@pytest.mark.parametrize("path", ["/v1/signal-watchers", "/v1/admin/signal-watchers", "/checks"])
async def test_an_offset_with_a_cursor_skips_that_many_items_after_the_cursors_position(
    api: httpx.AsyncClient, units: PostgresUnitsOfWork, path: str
) -> None:
    """Six items; the first page (limit 2) ends at the second; then `offset` 0, 1, 3 (the last item), 4
    (exactly past the end) and 1,000,000 after that cursor, and the same offsets without a cursor."""
    headers = ADMIN if path.startswith("/v1/admin") else ALICE
    if path == "/checks":
        [watcher] = await _insert_watchers(units, "alice", 1)
        path = f"/v1/signal-watchers/{watcher}/checks"
        base = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
        rows = [
            CheckRow(uuid.uuid4(), uuid.UUID(watcher), base + timedelta(seconds=n // 2), 200, "h", False,
                     None, None, 5, None)
            for n in range(6)
        ]  # fmt: skip
        async with units() as uow:
            for check in rows:
                await uow.checks.insert(check)
        ordered = [str(c.id) for c in sorted(rows, key=lambda c: (c.checked_at, c.id), reverse=True)]
    else:
        ordered = sorted(await _insert_watchers(units, "alice", 6))
    first = (await api.get(path, params={"limit": 2}, headers=headers)).json()
    assert [i["id"] for i in first["items"]] == ordered[:2]
    for offset, expected in [(0, ordered[2:4]), (1, ordered[3:5]), (3, ordered[5:]), (4, []), (10**6, [])]:
        params = {"limit": 2, "cursor": first["next_cursor"], "offset": offset}
        page = await api.get(path, params=params, headers=headers)
        assert page.status_code == 200, page.text
        assert [i["id"] for i in page.json()["items"]] == expected, offset
        assert page.json()["offset"] == offset
        more = len(ordered) > 2 + offset + 2
        assert (page.json()["next_cursor"] is not None) == more, offset
        alone = (await api.get(path, params={"limit": 2, "offset": offset}, headers=headers)).json()
        assert [i["id"] for i in alone["items"]] == ordered[offset : offset + 2], offset
