"""Deleting expired nonce receipts (the only receipts the runtime role may delete)."""

from __future__ import annotations

from bell_receiver.service_layer.ports import UnitOfWorkFactory


class ReceiptPurger:
    """One purge of the expired receipts (the worker, entrypoints/receipt_purge_worker.py, repeats it)."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def purge_expired(self) -> int:
        """Remove every expired receipt; how many."""
        async with self._uow() as unit:
            return await unit.receipts.purge_expired()
