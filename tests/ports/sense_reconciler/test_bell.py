"""The `BellPort`: the signed client against the real bell-receiver (its own process and schema) and the
in-memory Bell of the use-case tests answer a batch alike: accepted once, duplicate when sent again,
rejected with Bell's code for an invalid fact or another fact under a stored event id, in input order."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from sense_reconciler.adapters.bell_client import BellClient
from sense_reconciler.adapters.memory import MemoryBell
from sense_reconciler.domain.audit_facts import OutboxFact
from sense_reconciler.domain.audit_push_outcome import ItemResults, ItemStatus
from sense_reconciler.service_layer.ports import BellPort
from tests.support.bell_receiver_fixtures import Keys
from tests.support.sense_audit_push_fixtures import push_config

ACCEPTED, DUPLICATE, REJECTED = ItemStatus.ACCEPTED, ItemStatus.DUPLICATE, ItemStatus.REJECTED


def fact(n: int, **changes: object) -> OutboxFact:
    made = OutboxFact(
        row_id=n,
        event_id=uuid.uuid4(),
        fact_version=2,
        action="device.config_changed",
        actor="operator:alice",
        device_id=uuid.uuid4(),
        tenant_id="tenant-a",
        site_id="site-1",
        changed_fields=("name",),
        config_version=n,
        occurred_at=datetime(2026, 11, 30, 12, 0, n, tzinfo=UTC),
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


async def results(bell: BellPort, facts: list[OutboxFact]) -> list[tuple[ItemStatus, str | None]]:
    answer = await bell.send(facts)
    assert isinstance(answer, ItemResults), answer
    assert [item.event_id for item in answer.items] == [f.event_id for f in facts]
    return [(item.status, item.code) for item in answer.items]


class BellContract:
    @pytest.fixture
    def bell_port(self) -> BellPort:
        raise NotImplementedError

    async def test_new_facts_are_accepted_and_a_resend_is_duplicate(self, bell_port: BellPort) -> None:
        facts = [fact(1), fact(2), fact(3)]
        assert await results(bell_port, facts) == [(ACCEPTED, None)] * 3
        assert await results(bell_port, [facts[1], fact(4)]) == [(DUPLICATE, None), (ACCEPTED, None)]

    async def test_invalid_and_conflicting_facts_are_rejected_with_bells_code_in_place(
        self, bell_port: BellPort
    ) -> None:
        stored = fact(1)
        assert await results(bell_port, [stored]) == [(ACCEPTED, None)]
        conflicting = dataclasses.replace(stored, actor="operator:mallory")
        invalid = fact(2, tenant_id="tenant with spaces")
        assert await results(bell_port, [fact(3), conflicting, invalid, fact(4)]) == [
            (ACCEPTED, None),
            (REJECTED, "id_conflict"),
            (REJECTED, "invalid_field"),
            (ACCEPTED, None),
        ]

    async def test_the_same_fact_twice_in_one_batch_is_stored_once(self, bell_port: BellPort) -> None:
        once = fact(1)
        assert await results(bell_port, [once, once]) == [(ACCEPTED, None), (DUPLICATE, None)]


class TestRealBell(BellContract):
    @pytest.fixture
    async def bell_port(self, bell_url: str, keys: Keys) -> AsyncIterator[BellPort]:
        async with BellClient(push_config(bell_url, keys)) as client:
            yield client


class TestMemoryBell(BellContract):
    @pytest.fixture
    def bell_port(self) -> BellPort:
        return MemoryBell()
