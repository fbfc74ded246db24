"""Deleting expired nonce receipts (the only receipts the runtime role may delete)."""

from __future__ import annotations

from bell_receiver.service_layer.ports import UnitOfWorkFactory


async def purge_expired_receipts(uow: UnitOfWorkFactory) -> int:
    async with uow() as unit:
        return await unit.receipts.purge_expired()
