"""Purging receipts on the fakes' clock: a receipt lives `NONCE_RECEIPT_TTL_SECONDS`, then the purge removes
it (the PostgreSQL clock's stamp and trigger: tests/integration/bell_receiver/test_storage_rules.py)."""

from __future__ import annotations

import hashlib

from bell_receiver.domain.receipts import Receipt
from tests.unit.bell_receiver.conftest import Fakes
from yovision_platform.security import NONCE_RECEIPT_TTL_SECONDS


async def test_the_purge_removes_receipts_once_their_lifetime_is_over(fakes: Fakes) -> None:
    uow = fakes.uow.factory()
    async with uow() as unit:
        await unit.receipts.store("k1", "older", Receipt(hashlib.sha256(b"a").digest(), 200, b"a"))
    fakes.clock.now += 10
    async with uow() as unit:
        await unit.receipts.store("k1", "newer", Receipt(hashlib.sha256(b"b").digest(), 200, b"b"))
    purger = fakes.use_cases().receipt_purger
    fakes.clock.now += NONCE_RECEIPT_TTL_SECONDS - 11
    assert await purger.purge_expired() == 0
    fakes.clock.now += 1
    assert await purger.purge_expired() == 1
    assert set(fakes.uow.receipts.receipts) == {("k1", "newer")}
    fakes.clock.now += 10
    assert await purger.purge_expired() == 1
    assert fakes.uow.receipts.receipts == {}
