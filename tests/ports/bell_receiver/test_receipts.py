"""`ReceiptStore`: a receipt per (key id, nonce) reads back byte for byte until it expires; an expired one
is ignored (and removed) so the nonce can be answered anew; the purge removes exactly the expired ones."""

from __future__ import annotations

import hashlib

import pytest

from bell_receiver.domain.receipts import Receipt
from tests.ports.bell_receiver.harness import Harness, MemoryHarness, PostgresHarness


def receipt(text: str, status: int = 200) -> Receipt:
    body = text.encode()
    return Receipt(hashlib.sha256(body).digest(), status, body)


class Failure(Exception):
    pass


async def store_then_fail(bell: Harness, key_id: str, nonce: str, kept: Receipt) -> None:
    async with bell.uow() as uow:
        await uow.receipts.store(key_id, nonce, kept)
        raise Failure


class ReceiptStoreContract:
    @pytest.fixture
    async def bell(self) -> Harness:
        raise NotImplementedError

    async def find(self, bell: Harness, key_id: str, nonce: str) -> Receipt | None:
        async with bell.uow() as uow:
            return await uow.receipts.find_live(key_id, nonce)

    async def store(self, bell: Harness, key_id: str, nonce: str, kept: Receipt) -> None:
        async with bell.uow() as uow:
            await uow.receipts.lock(key_id, nonce)
            assert await uow.receipts.find_live(key_id, nonce) is None
            await uow.receipts.store(key_id, nonce, kept)

    async def test_a_stored_receipt_reads_back_exactly_per_key_and_nonce(self, bell: Harness) -> None:
        first, other = receipt('{"results":[]}'), receipt('{"error":"invalid_envelope"}', 400)
        await self.store(bell, "k1", "n1", first)
        await self.store(bell, "k2", "n1", other)
        assert await self.find(bell, "k1", "n1") == first
        assert await self.find(bell, "k2", "n1") == other
        assert await self.find(bell, "k1", "n2") is None

    async def test_an_expired_receipt_is_ignored_and_the_nonce_answered_anew(self, bell: Harness) -> None:
        await self.store(bell, "k1", "n1", receipt("old"))
        await bell.expire("k1", "n1")
        assert await self.find(bell, "k1", "n1") is None
        await self.store(bell, "k1", "n1", receipt("new"))
        assert await self.find(bell, "k1", "n1") == receipt("new")

    async def test_the_purge_removes_only_expired_receipts(self, bell: Harness) -> None:
        for nonce in ("old-1", "old-2", "fresh"):
            await self.store(bell, "k1", nonce, receipt(nonce))
        await bell.expire("k1", "old-1")
        await bell.expire("k1", "old-2")
        async with bell.uow() as uow:
            assert await uow.receipts.purge_expired() == 2
        async with bell.uow() as uow:
            assert await uow.receipts.purge_expired() == 0
        assert await self.find(bell, "k1", "fresh") == receipt("fresh")

    async def test_a_receipt_of_a_failed_unit_of_work_is_not_kept(self, bell: Harness) -> None:
        with pytest.raises(Failure):
            await store_then_fail(bell, "k1", "n1", receipt("lost"))
        assert await self.find(bell, "k1", "n1") is None


class TestPostgresReceiptStore(PostgresHarness, ReceiptStoreContract):
    pass


class TestMemoryReceiptStore(MemoryHarness, ReceiptStoreContract):
    pass
