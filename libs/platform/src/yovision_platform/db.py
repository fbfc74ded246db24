"""PostgreSQL access: the asyncpg pool and SQL identifier hygiene.

Every service owns one schema. Repository modules qualify their tables with the schema name, which is
configuration, so identifiers must be validated once here and quoted wherever they are interpolated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import asyncpg
from asyncpg.pool import PoolConnectionProxy

__all__ = ["DbConnection", "Identifier", "create_pool", "quote_ident"]

# A plain connection or one borrowed from a pool; repository functions accept either.
DbConnection = asyncpg.Connection | PoolConnectionProxy

_IDENTIFIER_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 10
POOL_COMMAND_TIMEOUT_SECONDS = 30.0


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
    """Open a pool; `application_name` makes every session visible in pg_stat_activity."""
    settings = {"application_name": application_name, **(server_settings or {})}
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        command_timeout=POOL_COMMAND_TIMEOUT_SECONDS,
        server_settings=settings,
    )
    assert pool is not None
    return pool
