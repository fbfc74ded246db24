"""A recorded device-audit fact → the batch item of contract ``sense-audit-relay-v1`` (format 1 or 2), and
the batch body the audit push sends. Pure: no I/O.

The fact carries only what the outbox row holds: ids, action, actor, the *names* of changed fields and the
config version. No source URI, token or key can reach the body because the outbox has no such column.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import orjson

from yovision_platform import audit_push

__all__ = ["OutboxFact", "batch_body", "fact_document"]


class FactRecord(Protocol):
    """A row by column name: a mapping, or the database driver's record as it was read."""

    def __getitem__(self, column: str, /) -> Any: ...


@dataclass(frozen=True)
class OutboxFact:
    """The columns of one ``device_operation_outbox`` row that make up the fact."""

    row_id: int
    event_id: uuid.UUID
    fact_version: int
    action: str
    actor: str
    device_id: uuid.UUID
    tenant_id: str
    site_id: str
    changed_fields: Sequence[str]
    config_version: int
    occurred_at: datetime
    # Not part of the fact: the W3C context of the change it reports, which the push continues.
    trace_parent: str | None = None

    @classmethod
    def from_row(cls, row: FactRecord) -> OutboxFact:
        return cls(
            row_id=row["id"],
            event_id=row["event_id"],
            fact_version=row["fact_version"],
            action=row["action"],
            actor=row["actor"],
            device_id=row["device_id"],
            tenant_id=row["tenant_id"],
            site_id=row["site_id"],
            changed_fields=tuple(row["changed_fields"]),
            config_version=row["config_version"],
            occurred_at=row["occurred_at"],
            trace_parent=row["trace_parent"],
        )


def fact_document(fact: OutboxFact) -> dict[str, Any]:
    """The JSON object of one batch item, in the contract's canonical form. Format 2's ``correlation_id``
    is always null: the outbox records no correlation id."""
    return audit_push.fact_document(
        fact_version=fact.fact_version,
        event_id=fact.event_id,
        occurred_at=fact.occurred_at,
        tenant_id=fact.tenant_id,
        site_id=fact.site_id,
        device_id=str(fact.device_id),
        action=fact.action,
        actor=fact.actor,
        changed_fields=fact.changed_fields,
        config_version=fact.config_version,
    )


def batch_body(facts: Sequence[OutboxFact]) -> bytes:
    """The request body ``{"items": [...]}``, compact UTF-8 JSON, items in the given order: the bytes of
    ``json.dumps(..., separators=(",", ":"), ensure_ascii=False)``, which orjson writes alike for what a
    fact holds (text, 64-bit integers, null, lists of text)."""
    items = [fact_document(fact) for fact in facts]
    return orjson.dumps({"items": items})
