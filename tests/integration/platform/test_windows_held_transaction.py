"""A transaction held open for 60 s delays only its own rows (the scenario runs in the background from the
first platform test on: tests/integration/platform/held_transaction_probe.py)."""

from __future__ import annotations

from tests.integration.platform.conftest import HeldTransactionProbe

# Rows enqueued this long before the held transaction commits must have arrived before it commits: far more
# than a relay needs, so the assertion holds on a loaded machine, and far less than the hold (half of it when
# YOVISION_TEST_HOLD_SECONDS shortens the hold for a quick local run).
SLACK_SECONDS = 30.0


async def test_a_transaction_held_open_for_60_s_delays_only_its_own_rows(
    held_transaction_probe: HeldTransactionProbe,
) -> None:
    result = await held_transaction_probe.result()
    assert result["committed"] - result["opened"] >= held_transaction_probe.hold_seconds
    rows = result["rows"]
    assert all(row["arrived"] is not None for row in rows), "every row arrives"
    slack = min(SLACK_SECONDS, held_transaction_probe.hold_seconds / 2)
    early = [row for row in rows if row["enqueued"] <= result["committed"] - slack]
    assert any(row["key"] == result["same_shard_key"] for row in early), "rows of the held row's shard too"
    late_while_held = [row["value"] for row in early if row["arrived"] >= result["committed"]]
    assert late_while_held == [], "rows committed during the hold are published during the hold"
    assert result["held_arrived"] is not None and result["held_arrived"] >= result["committed"]
