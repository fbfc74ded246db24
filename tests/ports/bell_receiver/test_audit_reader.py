"""`AuditReader`: committed rows, newest first by (occurred_at, id), each filter alone and combined, the
half-open time range, keyset continuation (ties on occurred_at broken by id) and the page limit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bell_receiver.domain.audit import AuditFilter, AuditRow, Channel
from bell_receiver.domain.paging import PagePosition
from tests.ports.bell_receiver.harness import Harness, MemoryHarness, PostgresHarness
from tests.support.bell_samples import T0, audit_row
from yovision_platform.audit_push import digest_of


def row(
    n: int, *, source: str = "sense", event_type: str = "DeviceAuditRecorded", second: int | None = None
) -> AuditRow:
    return audit_row(n, source=source, event_type=event_type, device=f"dev-{n % 3}", second=second)


class AuditReaderContract:
    @pytest.fixture
    async def bell(self) -> Harness:
        raise NotImplementedError

    @pytest.fixture
    async def seeded(self, bell: Harness) -> Harness:
        async with bell.uow() as uow:
            await uow.audit_trail.append([row(n) for n in range(10)], Channel.HTTP_RELAY)
            await uow.audit_trail.append(
                [row(100 + n, source="media", event_type="TranscodeFailed") for n in range(3)], Channel.KAFKA
            )
        return bell

    async def numbers(self, bell: Harness, where: AuditFilter, limit: int = 100) -> list[int]:
        return [r.payload["n"] for r in await bell.reader.page(where, limit, None)]

    async def test_an_empty_trail_reads_empty(self, bell: Harness) -> None:
        assert await bell.reader.page(AuditFilter(), 10, None) == []

    async def test_rows_read_back_newest_first_with_every_column(self, seeded: Harness) -> None:
        rows = await seeded.reader.page(AuditFilter(), 100, None)
        assert [r.payload["n"] for r in rows] == [102, 101, 100, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
        oldest = rows[-1]
        assert (oldest.source_system, oldest.event_type, oldest.action, oldest.actor) == (
            "sense",
            "DeviceAuditRecorded",
            "sense.action",
            "actor-0",
        )
        assert (oldest.tenant_id, oldest.site_id, oldest.device_id, oldest.channel) == (
            "tenant-a",
            None,
            "dev-0",
            "http_relay",
        )
        assert oldest.occurred_at == T0 and oldest.payload == {"n": 0, "changed_fields": ["source_uri"]}
        assert oldest.digest == digest_of(oldest.payload)
        assert oldest.received_at.tzinfo is not None
        assert rows[0].channel == "kafka" and rows[0].tenant_id is None
        assert len({r.id for r in rows}) == 13

    @pytest.mark.parametrize(
        ("where", "expected"),
        [
            (AuditFilter(source_system="media"), [102, 101, 100]),
            (AuditFilter(event_type="TranscodeFailed"), [102, 101, 100]),
            (AuditFilter(source_system="sense", event_type="TranscodeFailed"), []),
            (AuditFilter(device_id="dev-1"), [100, 7, 4, 1]),
            (AuditFilter(actor="actor-1", source_system="sense"), [9, 7, 5, 3, 1]),
            (
                AuditFilter(
                    occurred_from=T0 + timedelta(seconds=2), occurred_before=T0 + timedelta(seconds=5)
                ),
                [4, 3, 2],
            ),
            (AuditFilter(occurred_from=T0 + timedelta(seconds=9), source_system="sense"), [9]),
            (AuditFilter(occurred_before=T0 + timedelta(seconds=1)), [0]),
            (AuditFilter(device_id="no-such-device"), []),
        ],
    )
    async def test_each_filter_narrows_the_trail(
        self, seeded: Harness, where: AuditFilter, expected: list[int]
    ) -> None:
        assert await self.numbers(seeded, where) == expected

    async def test_the_limit_cuts_the_newest_rows(self, seeded: Harness) -> None:
        assert await self.numbers(seeded, AuditFilter(source_system="sense"), limit=3) == [9, 8, 7]

    async def test_pages_continue_after_a_position_without_repeats_or_gaps_on_equal_times(
        self, bell: Harness
    ) -> None:
        async with bell.uow() as uow:
            await uow.audit_trail.append([row(n, second=n // 3) for n in range(7)], Channel.KAFKA)
        everything = await bell.reader.page(AuditFilter(), 100, None)
        seen: list[int] = []
        after: PagePosition | None = None
        while True:
            page = await bell.reader.page(AuditFilter(), 2, after)
            if not page:
                break
            seen += [r.id for r in page]
            after = PagePosition(page[-1].occurred_at, page[-1].id)
        assert seen == [r.id for r in everything] and len(seen) == 7
        keys = [(r.occurred_at, r.id) for r in everything]
        assert keys == sorted(keys, reverse=True)


class TestPostgresAuditReader(PostgresHarness, AuditReaderContract):
    pass


class TestMemoryAuditReader(MemoryHarness, AuditReaderContract):
    pass
