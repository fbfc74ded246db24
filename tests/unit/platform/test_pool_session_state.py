"""No code that runs on a pooled connection leaves session state behind it.

The platform's pool hands a connection back without asyncpg's reset query (yovision_platform.storage,
`_keep_session`): a round trip per borrow, for state this code never leaves. This scan keeps that true
over the services' and the platform's sources. Migrations and the operator tools run on connections of
their own, never a service's pool, and are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE_ROOTS = [REPO_ROOT / "libs" / "platform" / "src", *sorted((REPO_ROOT / "services").glob("*/src"))]
OWN_CONNECTIONS = ("migrations", "tools")  # path parts whose code never borrows from a service's pool
# Where each kind is allowed: the relay's one LISTEN, removed before its connection goes back
# (`_unlisten`), and the platform's session lock, which ends a session it could not unlock.
LISTENER_MODULE = "yovision_platform/messaging/_relay.py"
ALLOWED = {"a LISTEN": LISTENER_MODULE, "a session-level advisory lock": "yovision_platform/storage/_db.py"}

SESSION_STATE = {
    "a session-level advisory lock": re.compile(r"pg_(?:try_)?advisory_lock(?:_shared)?\s*\(", re.I),
    # Case-sensitive, as the code's SQL is written: "Set" and "set(" are prose and Python.
    "a session-level SET": re.compile(
        r"(?:^|[;\"'(])\s*SET\s+(?!LOCAL\b)(?!search_path\s*=\s*pg_catalog)\w+"
    ),
    "set_config for the session": re.compile(r"set_config\s*\([^)]*,\s*false\s*\)", re.I),
    "a held cursor": re.compile(r"\bWITH\s+HOLD\b|\bDECLARE\s+\w+\s+(?:\w+\s+)*CURSOR\b", re.I),
    "a temporary table": re.compile(r"\bCREATE\s+(?:LOCAL\s+|GLOBAL\s+)?TEMP(?:ORARY)?\s+TABLE\b", re.I),
    "a prepared statement by SQL": re.compile(r"(?:^|[;\"'])\s*PREPARE\s+\w+", re.I),
    "a LISTEN": re.compile(r"(?:^|[;\"'])\s*LISTEN\s+\w+|\badd_listener\s*\(", re.I),
}


def pooled_sources() -> list[Path]:
    return [
        path
        for root in SOURCE_ROOTS
        for path in sorted(root.rglob("*"))
        if path.suffix in {".py", ".sql"} and not any(part in OWN_CONNECTIONS for part in path.parts)
    ]


def findings(text: str, relative: str) -> list[str]:
    found = []
    for name, pattern in SESSION_STATE.items():
        if name in ALLOWED and relative.endswith(ALLOWED[name]):
            continue
        found += [f"{relative}: {name}: {match.group(0).strip()!r}" for match in pattern.finditer(text)]
    return found


def test_the_scan_covers_every_service_and_the_platform() -> None:
    sources = pooled_sources()
    assert len(SOURCE_ROOTS) == 7  # the platform, five services and the console
    for root in SOURCE_ROOTS:
        assert any(path.is_relative_to(root) for path in sources), root


def test_no_pooled_code_leaves_session_state() -> None:
    found = []
    for path in pooled_sources():
        found += findings(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))
    assert found == []


def test_the_relay_removes_its_listener_before_the_connection_goes_back() -> None:
    relay = (REPO_ROOT / "libs" / "platform" / "src" / LISTENER_MODULE).read_text(encoding="utf-8")
    assert relay.count("add_listener(") == relay.count("remove_listener(") == 1


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT pg_advisory_lock(42)",
        "SELECT pg_try_advisory_lock_shared(1, 2)",
        'await conn.execute("SET statement_timeout = 0")',
        "BEGIN; SET work_mem = '64MB'",
        "SELECT set_config('search_path', 'x', false)",
        "DECLARE c NO SCROLL CURSOR WITH HOLD FOR SELECT 1",
        "CREATE TEMP TABLE t (x int)",
        "'PREPARE q AS SELECT 1'",
        "'LISTEN wake'",
        "await conn.add_listener('wake', callback)",
    ],
)
def test_each_kind_of_session_state_is_found(statement: str) -> None:
    assert findings(statement, "services/x/src/x/adapters/store.py")


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        "await conn.execute(f'SET LOCAL search_path = {schema}')",
        "UPDATE t SET lease_owner = $1 WHERE id = $2",
        "INSERT INTO t VALUES ($1) ON CONFLICT (id) DO UPDATE SET n = excluded.n",
        "LANGUAGE plpgsql SET search_path = pg_catalog AS $$",
        "SELECT set_config('app.actor', $1, true)",
        '"""Set the site\'s limit"""',
        "received = sorted(set(chunks))",
    ],
)
def test_transaction_scoped_state_is_not_a_finding(statement: str) -> None:
    assert findings(statement, "services/x/src/x/adapters/store.py") == []
