"""Storage: the PostgreSQL pool, the platform's migrations (``sql/``), the unit of work and leases.

The modules below are private; import the names listed in ``__all__`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yovision_platform._exports import lazy_exports

if TYPE_CHECKING:
    from yovision_platform.storage._db import STORE_ERRORS as STORE_ERRORS
    from yovision_platform.storage._db import DatabaseUnavailable as DatabaseUnavailable
    from yovision_platform.storage._db import DbConnection as DbConnection
    from yovision_platform.storage._db import Identifier as Identifier
    from yovision_platform.storage._db import create_pool as create_pool
    from yovision_platform.storage._db import is_database_unavailable as is_database_unavailable
    from yovision_platform.storage._db import quote_ident as quote_ident
    from yovision_platform.storage._db import session_advisory_lock as session_advisory_lock
    from yovision_platform.storage._leases import MAX_CLAIM_BATCH as MAX_CLAIM_BATCH
    from yovision_platform.storage._leases import ClaimedRow as ClaimedRow
    from yovision_platform.storage._leases import Lease as Lease
    from yovision_platform.storage._leases import LeaseTable as LeaseTable
    from yovision_platform.storage._migrations import PLATFORM_TRACK as PLATFORM_TRACK
    from yovision_platform.storage._migrations import Migration as Migration
    from yovision_platform.storage._migrations import SchemaPlan as SchemaPlan
    from yovision_platform.storage._migrations import drop as drop
    from yovision_platform.storage._migrations import load_migrations as load_migrations
    from yovision_platform.storage._migrations import migrate as migrate
    from yovision_platform.storage._migrations import platform_migrations as platform_migrations
    from yovision_platform.storage._migrations import preflight as preflight
    from yovision_platform.storage._unit_of_work import MemoryOutbox as MemoryOutbox
    from yovision_platform.storage._unit_of_work import MemoryUnitOfWork as MemoryUnitOfWork
    from yovision_platform.storage._unit_of_work import OutboxWriter as OutboxWriter
    from yovision_platform.storage._unit_of_work import PostgresUnitOfWork as PostgresUnitOfWork
    from yovision_platform.storage._unit_of_work import TransactionalOutbox as TransactionalOutbox
    from yovision_platform.storage._unit_of_work import UnitOfWork as UnitOfWork

__all__ = [
    "MAX_CLAIM_BATCH",
    "PLATFORM_TRACK",
    "STORE_ERRORS",
    "ClaimedRow",
    "DatabaseUnavailable",
    "DbConnection",
    "Identifier",
    "Lease",
    "LeaseTable",
    "MemoryOutbox",
    "MemoryUnitOfWork",
    "Migration",
    "OutboxWriter",
    "PostgresUnitOfWork",
    "SchemaPlan",
    "TransactionalOutbox",
    "UnitOfWork",
    "create_pool",
    "drop",
    "is_database_unavailable",
    "load_migrations",
    "migrate",
    "platform_migrations",
    "preflight",
    "quote_ident",
    "session_advisory_lock",
]

__getattr__ = lazy_exports(__name__, __file__)
