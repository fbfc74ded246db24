"""Composition root of bell-receiver's use cases: the ports in, `BellUseCases` out.

Production (`entrypoints/main.py`) passes the PostgreSQL adapters; the unit tests and benches pass the
fakes (`adapters/memory.py`). Nothing else constructs a use case.
"""

from __future__ import annotations

from dataclasses import dataclass

from bell_receiver.service_layer.audit_batch_receiver import AuditBatchReceiver
from bell_receiver.service_layer.audit_events import AuditEvents
from bell_receiver.service_layer.ingest import EventIngester
from bell_receiver.service_layer.metrics import BellMetrics
from bell_receiver.service_layer.notifications import Notifications
from bell_receiver.service_layer.ports import AuditReader, UnitOfWorkFactory
from bell_receiver.service_layer.receipt_purge import ReceiptPurger


@dataclass(frozen=True)
class BellUseCases:
    """What the routes and the workers call."""

    audit_batches: AuditBatchReceiver
    notifications: Notifications
    audit_events: AuditEvents
    ingester: EventIngester
    receipt_purger: ReceiptPurger


def bootstrap(*, uow: UnitOfWorkFactory, audit_reader: AuditReader, metrics: BellMetrics) -> BellUseCases:
    """Bell's use cases on these ports. The ingester takes the consumer's own unit of work per event (it
    joins the consumer's transaction), so it holds no factory."""
    return BellUseCases(
        audit_batches=AuditBatchReceiver(uow, metrics),
        notifications=Notifications(uow),
        audit_events=AuditEvents(audit_reader),
        ingester=EventIngester(metrics),
        receipt_purger=ReceiptPurger(uow),
    )
