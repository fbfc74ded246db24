"""PostgreSQL access: the asyncpg pool and SQL identifier hygiene.

Every service owns one schema. Repository modules qualify their tables with the schema name, which is
configuration, so identifiers must be validated once here and quoted wherever they are interpolated.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import asyncpg
import asyncpg.exceptions as pg_errors
from asyncpg.pool import PoolConnectionProxy

from yovision_platform.errors import PlatformError

__all__ = [
    "STORE_ERRORS",
    "DatabaseUnavailable",
    "DbConnection",
    "Identifier",
    "create_pool",
    "is_database_unavailable",
    "quote_ident",
    "session_advisory_lock",
]

# A plain connection or one borrowed from a pool; repository functions accept either.
DbConnection = asyncpg.Connection | PoolConnectionProxy

_IDENTIFIER_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 10
POOL_COMMAND_TIMEOUT_SECONDS = 30.0
# A new pooled connection must be up within this; asyncpg's own default (60 s) would hold a request that long
# while PostgreSQL is unreachable.
POOL_CONNECT_TIMEOUT_SECONDS = 5.0

# Server or link states that say "the database is not there right now", not "this statement is wrong":
# connection exceptions (class 08), admin/crash shutdown and start-up (57P01-57P03), too many connections.
_UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    pg_errors.PostgresConnectionError,
    pg_errors.AdminShutdownError,
    pg_errors.CrashShutdownError,
    pg_errors.CannotConnectNowError,
    pg_errors.TooManyConnectionsError,
    asyncpg.InterfaceError,  # e.g. "connection is closed": the pool hands out a new one next time
)


class DatabaseUnavailable(PlatformError, ConnectionError):
    """No connection to PostgreSQL could be made (refused, reset, timed out, server starting or stopping).

    Also a ConnectionError, so every loop that already waits out `OSError` keeps doing so."""

    code = "database_unavailable"


# What a store call raises when the database is unreachable or refuses a statement: a worker round that
# meets one logs its class and waits for the next round instead of crashing (service layers catch these
# without importing the driver).
STORE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    DatabaseUnavailable,
)


def is_database_unavailable(exc: BaseException) -> bool:
    """True for errors that mean PostgreSQL is unreachable or going away, whatever the statement."""
    return isinstance(exc, (DatabaseUnavailable, *_UNAVAILABLE_ERRORS))


async def _connect(*args: Any, **kwargs: Any) -> asyncpg.Connection:
    try:
        return await asyncpg.connect(*args, **kwargs)
    except Exception as exc:
        if not isinstance(exc, (OSError, *_UNAVAILABLE_ERRORS)):
            raise
        # The class name only: driver messages may carry host or role names.
        raise DatabaseUnavailable(detail=type(exc).__name__) from exc


class Identifier(str):
    """A lowercase SQL identifier already validated (letters, digits, underscore; at most 63 bytes)."""

    __slots__ = ()

    def __new__(cls, value: str) -> Identifier:
        if not _IDENTIFIER_PATTERN.fullmatch(value):
            raise ValueError("invalid SQL identifier: must match [a-z_][a-z0-9_]{0,62}")
        return super().__new__(cls, value)

    @property
    def quoted(self) -> str:
        return quote_ident(self)


def quote_ident(name: str) -> str:
    """Quote an identifier that has already passed `Identifier` validation."""
    Identifier(name)
    return f'"{name}"'


async def create_pool(
    dsn: str,
    *,
    application_name: str,
    min_size: int = POOL_MIN_SIZE,
    max_size: int = POOL_MAX_SIZE,
    server_settings: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """Open a pool; `application_name` makes every session visible in pg_stat_activity. A connection that
    cannot be made raises `DatabaseUnavailable` (from `acquire` too, while PostgreSQL is down)."""
    settings = {"application_name": application_name, **(server_settings or {})}
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        command_timeout=POOL_COMMAND_TIMEOUT_SECONDS,
        timeout=POOL_CONNECT_TIMEOUT_SECONDS,
        server_settings=settings,
        connect=_connect,
        reset=_keep_session,
    )
    assert pool is not None
    return pool


async def _keep_session(_connection: asyncpg.Connection) -> None:
    """What a connection returned to the pool still needs undone: nothing.

    asyncpg has already rolled back a transaction left open and dropped the listener callbacks. Its default
    reset adds a round trip per borrow (`pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`) for
    session state this code never leaves behind: every `SET` is `SET LOCAL`, no cursor is held, the relay's
    one `LISTEN` is removed before its connection goes back, every advisory lock is transaction-scoped but
    `session_advisory_lock`'s, which ends its session rather than hand it back holding the lock
    (tests/unit/platform/test_pool_session_state.py keeps all this so). That round trip was half of an idle
    service's queries (docs/decisions.md, "Suite time: what an idle service costs")."""


@contextlib.asynccontextmanager
async def session_advisory_lock(pool: asyncpg.Pool, key: str) -> AsyncIterator[bool]:
    """Try for PostgreSQL's session advisory lock on `key`, on a pooled connection of its own held for the
    block; yields whether it was taken. A crashed process releases it with its session.

    The pool does not reset what goes back to it (`_keep_session`), so a connection whose lock or unlock
    did not complete (an error, a cancellation) is terminated instead: PostgreSQL drops the lock with the
    session, and the pool opens a new connection when it needs one."""
    async with pool.acquire() as conn:
        settled = False
        try:
            held = bool(await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key))
            try:
                yield held
            finally:
                if held:
                    await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)
                settled = True
        finally:
            if not settled:
                conn.terminate()
