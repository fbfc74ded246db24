"""free_port: below the ephemeral range, within the process's slice, each port handed out once a turn."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from yovision_platform.tools import localhost


@pytest.fixture
def fresh_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localhost, "_ports", None)


def ephemeral_range() -> range:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return range(int(low), int(high) + 1)


@pytest.mark.parametrize("slice_number", [0, 3, localhost.PORT_SLICES - 1, localhost.PORT_SLICES])
def test_ports_come_from_the_slice_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch, fresh_ports: None, slice_number: int
) -> None:
    monkeypatch.setenv(localhost.PORT_SLICE_VARIABLE, str(slice_number))
    size = len(localhost.PORT_BAND) // localhost.PORT_SLICES
    start = localhost.PORT_BAND.start + (slice_number % localhost.PORT_SLICES) * size
    ports = [localhost.free_port() for _ in range(50)]
    assert all(start <= p < start + size for p in ports), ports
    assert not set(ports) & set(ephemeral_range())
    assert len(set(ports)) == len(ports), "a port is handed out once a turn"


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch, fresh_ports: None) -> None:
    monkeypatch.setenv(localhost.PORT_SLICE_VARIABLE, "5")
    taken = localhost.free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        monkeypatch.setattr(localhost, "_ports", iter([taken, taken + 1]))
        assert localhost.free_port() == taken + 1
