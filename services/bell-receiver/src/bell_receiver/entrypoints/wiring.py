"""The use cases on PostgreSQL: what `main.configure` (and the tests serving the real app) install."""

from __future__ import annotations

import asyncpg

from bell_receiver.adapters.audit_reader import PostgresAuditReader
from bell_receiver.adapters.unit_of_work import PostgresBellUnitOfWork
from bell_receiver.entrypoints.api import UseCases
from bell_receiver.service_layer.audit_batch_receiver import AuditBatchReceiver
from bell_receiver.service_layer.audit_events import AuditEvents
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.service_layer.notifications import Notifications
from bell_receiver.service_layer.ports import UnitOfWorkFactory
from yovision_platform.db import Identifier


def unit_of_work(pool: asyncpg.Pool, schema: Identifier) -> UnitOfWorkFactory:
    return lambda: PostgresBellUnitOfWork(pool, schema)


def postgres_use_cases(pool: asyncpg.Pool, schema: Identifier, metrics: BellMetrics) -> UseCases:
    uow = unit_of_work(pool, schema)
    return UseCases(
        audit_batches=AuditBatchReceiver(uow, metrics),
        notifications=Notifications(uow),
        audit_events=AuditEvents(PostgresAuditReader(pool, schema)),
    )
