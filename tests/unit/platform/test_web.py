"""The platform app: one problem body for every error, no echo, NUL refused, body deadlines, outages."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka.errors import KafkaConnectionError
from fastapi import FastAPI, Request
from pydantic import BaseModel, Field

from tests.support.stack import problem_code
from yovision_platform.errors import ServiceError
from yovision_platform.storage import DatabaseUnavailable, is_database_unavailable
from yovision_platform.web import JsonInt, Rfc3339DateTime, create_app, guard_policy, with_problem_responses
from yovision_platform.web._guards import BodyReadRule, _NulScanner

SECRET = "s3cr3t-value-never-echoed"
HINT = "Write it as a.b or $.a.b."


class Item(BaseModel):
    name: str = Field(max_length=8)
    count: int = 0


def build(skip_paths: tuple[str, ...] = ()) -> FastAPI:
    app = create_app("demo", "0", skip_paths=skip_paths)

    @app.post("/items")
    async def create(item: Item) -> dict[str, str]:
        return {"name": item.name}

    @app.get("/items/{name}")
    async def get(name: str, tag: str = "") -> dict[str, str]:
        return {"name": name, "tag": tag}

    @app.get("/down/{kind}")
    async def down(kind: str) -> None:
        errors: dict[str, Exception] = {
            "pool": DatabaseUnavailable(detail="ConnectionRefusedError"),
            "link": asyncpg.exceptions.ConnectionDoesNotExistError("closed"),
            "shutdown": asyncpg.exceptions.AdminShutdownError("terminating"),
            "broker": KafkaConnectionError(),
            "sql": asyncpg.exceptions.UniqueViolationError(f"key ({SECRET}) exists"),
            "deadlock": asyncpg.exceptions.DeadlockDetectedError(f"deadlock on ({SECRET})"),
            "serialization": asyncpg.exceptions.SerializationError(f"could not serialize ({SECRET})"),
        }
        raise errors[kind]

    @app.put("/raw")
    async def raw(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    @app.get("/refused/{kind}")
    async def refused(kind: str) -> None:
        if kind == "hinted":
            raise ServiceError("bad_form", HINT, status=422)
        raise ServiceError("bad_form", status=422)

    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo.test") as http:
        yield http


async def test_a_validation_error_names_the_field_and_never_echoes_the_value(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/items", json={"name": SECRET, "count": SECRET})
    assert (response.status_code, problem_code(response)) == (422, "invalid_request")
    assert response.json()["fields"] == ["count", "name"]
    assert SECRET not in response.text
    assert response.json()["status"] == 422


async def test_an_unparsable_body_is_400_invalid_json_without_echo(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/items",
        content=b'{"name": "' + SECRET.encode() + b'",',
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, problem_code(response)) == (400, "invalid_json")
    assert SECRET not in response.text


async def test_a_json_body_under_another_media_type_is_415(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/items", content=json.dumps({"name": "a"}), headers={"content-type": "text/plain"}
    )
    assert (response.status_code, problem_code(response)) == (415, "unsupported_media_type")


async def test_a_wrong_method_is_405_with_allow_and_an_unknown_route_is_404(
    client: httpx.AsyncClient,
) -> None:
    wrong = await client.delete("/items")
    assert (wrong.status_code, problem_code(wrong), wrong.headers["allow"]) == (
        405,
        "method_not_allowed",
        "POST",
    )
    missing = await client.get(f"/nowhere/{SECRET}")
    assert (missing.status_code, problem_code(missing)) == (404, "not_found")
    assert SECRET not in missing.text


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("POST", "/items", '{"name": "a\\u0000b"}'),
        ("POST", "/items", '{"a\\u0000": 1, "name": "x"}'),
        ("POST", "/items", '{"name": "\\\\\\u0000"}'),  # an escaped backslash, then an escaped NUL
        ("GET", "/items/a%00b", None),
        ("GET", "/items/a?tag=x%00", None),
    ],
)
async def test_a_nul_anywhere_is_400_invalid_text_before_the_route_runs(
    client: httpx.AsyncClient, method: str, url: str, body: str | None
) -> None:
    headers = {"content-type": "application/json"} if body is not None else {}
    response = await client.request(method, url, content=body, headers=headers)
    assert (response.status_code, problem_code(response)) == (400, "invalid_text")


async def test_an_escaped_backslash_before_u0000_is_not_a_nul(client: httpx.AsyncClient) -> None:
    response = await client.post("/items", json={"name": "\\u0000"})
    assert (response.status_code, response.json()) == (200, {"name": "\\u0000"})


def test_the_nul_scanner_finds_an_escape_split_across_chunks() -> None:
    text = b'{"name": "abc\\u0000"}'
    for cut in range(1, len(text)):
        scanner = _NulScanner()
        assert scanner.found_in(text[:cut]) or scanner.found_in(text[cut:]), cut
    escaped_backslash = b'{"name": "abc\\\\u0000"}'
    for cut in range(1, len(escaped_backslash)):
        scanner = _NulScanner()
        assert not scanner.found_in(escaped_backslash[:cut]) and not scanner.found_in(escaped_backslash[cut:])


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("pool", 503, "database_unavailable"),
        ("link", 503, "database_unavailable"),
        ("shutdown", 503, "database_unavailable"),
        ("broker", 503, "broker_unavailable"),
        ("deadlock", 503, "database_busy"),
        ("serialization", 503, "database_busy"),
        ("sql", 500, "internal_error"),
    ],
)
async def test_dependency_failures_become_problems(
    client: httpx.AsyncClient, kind: str, status: int, code: str
) -> None:
    response = await client.get(f"/down/{kind}")
    assert (response.status_code, problem_code(response)) == (status, code)
    assert SECRET not in response.text
    if status == 503:
        assert response.headers["retry-after"] == ("1" if code == "database_busy" else "5")


async def test_a_refusal_answers_its_fixed_detail_only_when_it_has_one(client: httpx.AsyncClient) -> None:
    hinted = await client.get("/refused/hinted")
    plain = await client.get("/refused/plain")
    assert (hinted.status_code, problem_code(hinted), hinted.json()["detail"]) == (422, "bad_form", HINT)
    assert (plain.status_code, problem_code(plain)) == (422, "bad_form") and "detail" not in plain.json()


def test_database_unavailability_is_recognised_by_class() -> None:
    assert is_database_unavailable(DatabaseUnavailable())
    assert isinstance(DatabaseUnavailable(), ConnectionError)  # loops waiting out OSError keep doing so
    assert not is_database_unavailable(asyncpg.exceptions.UniqueViolationError("x"))


async def _call(
    app: FastAPI, method: str, path: str, chunks: list[bytes], declared: int
) -> tuple[int, float]:
    """Drive the app over raw ASGI with a client that sends `chunks` and then stalls."""
    sent: list[dict[str, Any]] = []
    queue = list(chunks)

    async def receive() -> dict[str, Any]:
        if queue:
            return {"type": "http.request", "body": queue.pop(0), "more_body": True}
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-length", str(declared).encode()),
            (b"content-type", b"application/octet-stream"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    started = time.monotonic()
    await asyncio.wait_for(app(scope, receive, send), 30)
    return next(m["status"] for m in sent if m["type"] == "http.response.start"), time.monotonic() - started


async def test_a_stalled_body_is_answered_408_at_the_total_deadline() -> None:
    app = build()
    guard_policy(app).body_rule = BodyReadRule(total_seconds=0.3)
    status, took = await _call(app, "PUT", "/raw", [b"x" * 100], declared=65_536)
    assert status == 408 and 0.3 <= took < 10


async def test_a_min_rate_rule_allows_time_in_proportion_to_the_bytes_received() -> None:
    app = build()
    guard_policy(app).override(
        "PUT",
        "/raw",
        body_rule=BodyReadRule(total_seconds=None, min_bytes_per_second=1000, grace_seconds=0.1),
    )
    status, took = await _call(app, "PUT", "/raw", [b"x" * 300], declared=65_536)
    assert status == 408 and 0.4 <= took < 10  # grace 0.1 s + 300 bytes at 1000 B/s


def test_the_body_rule_deadline_is_the_earlier_of_total_and_rate() -> None:
    rule = BodyReadRule(total_seconds=10.0, min_bytes_per_second=100.0, grace_seconds=2.0)
    assert rule.deadline(100.0, 0) == 102.0
    assert rule.deadline(100.0, 500) == 107.0
    assert rule.deadline(100.0, 5_000) == 110.0
    with pytest.raises(ValueError, match="needs a total"):
        BodyReadRule(total_seconds=None)


def test_the_document_states_the_platform_answers_on_every_operation_but_skipped_ones() -> None:
    document = build(skip_paths=("/raw",)).openapi()
    post = document["paths"]["/items"]["post"]["responses"]
    assert {"400", "408", "415", "422", "500", "503"} <= set(post)
    assert post["503"]["headers"]["Retry-After"]["schema"] == {"type": "integer"}
    assert post["422"]["content"] == {
        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
    }
    assert "408" not in document["paths"]["/items/{name}"]["get"]["responses"]
    assert set(document["paths"]["/raw"]["put"]["responses"]) == {"200"}
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert with_problem_responses(document) == with_problem_responses(with_problem_responses(document))
    assert set(build().openapi()["paths"]["/raw"]["put"]["responses"]) > {"200", "408"}


class Counted(BaseModel):
    count: JsonInt
    since: Rfc3339DateTime | None = None


@pytest.mark.parametrize("value", [5, 5.0, -1, 2**70])
def test_a_json_integer_is_an_int_or_an_integral_number(value: float) -> None:
    assert Counted.model_validate({"count": value}).count == int(value)


@pytest.mark.parametrize("value", [True, False, "5", 5.5, None, [5]])
def test_booleans_texts_and_fractions_are_not_json_integers(value: object) -> None:
    """pydantic's lax int read `true` as 1 and `"5"` as 5: a schema-invalid body was accepted."""
    with pytest.raises(ValueError, match="integer"):
        Counted.model_validate({"count": value})


@pytest.mark.parametrize(
    "text", ["2026-12-01T12:00:00Z", "2026-12-01t12:00:00.123456+01:00", "2026-12-01T12:00:00z"]
)
def test_an_rfc3339_date_time_is_read(text: str) -> None:
    assert Counted.model_validate({"count": 1, "since": text}).since is not None


@pytest.mark.parametrize(
    "text", ["0.5", "1764590400", "2026-12-01", "2026-12-01 12:00:00Z", "2026-12-01T12:00:00"]
)
def test_anything_else_is_not_a_date_time(text: str) -> None:
    """pydantic read `0.5` as a Unix time: `occurred_from=0.5` was accepted against `format: date-time`."""
    with pytest.raises(ValueError, match="date"):
        Counted.model_validate({"count": 1, "since": text})
