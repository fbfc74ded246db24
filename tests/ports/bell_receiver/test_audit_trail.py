"""`AuditTrailStore`: append is idempotent per (source_system, event_id), answers per row in input order, and
keeps the first row of an id; its preconditions refuse the whole call."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from bell_receiver.domain.audit import AppendOutcome, AuditFilter, AuditRow, Channel
from tests.ports.bell_receiver.harness import Harness, MemoryHarness, PostgresHarness
from tests.support.bell_samples import audit_row as row
from yovision_platform.audit_push import digest_of


class Failure(Exception):
    pass


async def append_then_fail(bell: Harness, appended: AuditRow) -> None:
    async with bell.uow() as uow:
        await uow.audit_trail.append([appended], Channel.KAFKA)
        raise Failure


class AuditTrailContract:
    @pytest.fixture
    async def bell(self) -> Harness:
        raise NotImplementedError

    async def stored(self, bell: Harness) -> list[tuple[uuid.UUID, str | None, str]]:
        rows = await bell.reader.page(AuditFilter(), 100, None)
        return [(r.event_id, r.actor, r.channel) for r in rows]

    async def test_new_rows_are_inserted_and_answered_in_input_order(self, bell: Harness) -> None:
        rows = [row(n) for n in range(3)]
        async with bell.uow() as uow:
            results = await uow.audit_trail.append(rows, Channel.HTTP_RELAY)
        assert [(r.outcome, r.stored_digest) for r in results] == [
            (AppendOutcome.INSERTED, r.digest) for r in rows
        ]
        assert sorted(await self.stored(bell)) == sorted((r.event_id, r.actor, "http_relay") for r in rows)

    async def test_a_known_id_keeps_its_first_row_and_tells_same_from_other_digest(
        self, bell: Harness
    ) -> None:
        first = row(1)
        async with bell.uow() as uow:
            await uow.audit_trail.append([first], Channel.HTTP_RELAY)
        fresh = row(2)
        same = row(1, event_id=first.event_id)
        other = row(2, event_id=first.event_id)
        async with bell.uow() as uow:
            answered = await uow.audit_trail.append([fresh, same], Channel.KAFKA)
            conflicting = await uow.audit_trail.append([other], Channel.KAFKA)
        assert [(r.outcome, r.stored_digest) for r in answered] == [
            (AppendOutcome.INSERTED, fresh.digest),
            (AppendOutcome.SAME_DIGEST, first.digest),
        ]
        assert [(r.outcome, r.stored_digest) for r in conflicting] == [
            (AppendOutcome.OTHER_DIGEST, first.digest)
        ]
        assert sorted(await self.stored(bell)) == sorted(
            [(first.event_id, "actor-1", "http_relay"), (fresh.event_id, "actor-0", "kafka")]
        )

    async def test_the_id_is_unique_per_source_system(self, bell: Harness) -> None:
        event_id = uuid.uuid4()
        async with bell.uow() as uow:
            sense = await uow.audit_trail.append([row(event_id=event_id)], Channel.HTTP_RELAY)
            media = await uow.audit_trail.append([row(event_id=event_id, source="media")], Channel.KAFKA)
        assert [r.outcome for r in sense + media] == [AppendOutcome.INSERTED, AppendOutcome.INSERTED]

    async def test_any_json_payload_is_stored_as_given(self, bell: Harness) -> None:
        """Another service's event may carry any JSON value: text beyond ASCII, floats, an integer beyond
        64 bits (which the fast encoder cannot write, so the whole call takes the stdlib's)."""
        payloads = [
            {"title": "Kamera S\u00fcd \u2013 \u5317\u9580 \U0001f3a5", "ratio": 0.1, "list": [{"a": None}]},
            {"size": 2**70, "neg": -2.5, "flag": True, "note": 'line\nbreak "quoted" \\'},
        ]
        for payload in payloads:
            stored = replace(row(len(payload), source="media"), payload=payload, digest=digest_of(payload))
            async with bell.uow() as uow:
                (result,) = await uow.audit_trail.append([stored], Channel.KAFKA)
            assert result.outcome is AppendOutcome.INSERTED
            (read,) = await bell.reader.page(AuditFilter(source_system="media"), 1, None)
            assert read.payload == payload and read.digest == digest_of(payload)

    async def test_nothing_to_append_answers_nothing(self, bell: Harness) -> None:
        async with bell.uow() as uow:
            assert await uow.audit_trail.append([], Channel.KAFKA) == []

    @pytest.mark.parametrize(
        ("mistake", "message"), [("two_sources", "one source"), ("repeated", "distinct")]
    )
    async def test_a_call_breaking_the_preconditions_stores_nothing(
        self, bell: Harness, mistake: str, message: str
    ) -> None:
        first = row(1)
        second = row(2, source="media") if mistake == "two_sources" else row(2, event_id=first.event_id)
        async with bell.uow() as uow:
            with pytest.raises(ValueError, match=message):
                await uow.audit_trail.append([first, second], Channel.KAFKA)
        assert await self.stored(bell) == []

    async def test_rows_of_a_failed_unit_of_work_are_not_stored(self, bell: Harness) -> None:
        kept = row(1)
        async with bell.uow() as uow:
            await uow.audit_trail.append([kept], Channel.KAFKA)
        with pytest.raises(Failure):
            await append_then_fail(bell, row(2))
        assert await self.stored(bell) == [(kept.event_id, "actor-1", "kafka")]


class TestPostgresAuditTrail(PostgresHarness, AuditTrailContract):
    pass


class TestMemoryAuditTrail(MemoryHarness, AuditTrailContract):
    pass
