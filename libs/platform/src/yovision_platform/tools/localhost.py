"""Small helpers for local tooling, tests and benchmarks: a free loopback port, a private secret file, the
stop of a child process."""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PORT_SLICE_VARIABLE", "free_port", "stop_process", "write_private_file"]

# Ports handed out come from below Linux's ephemeral range (32768-60999), never from it: a port picked
# from that range is free only until an outgoing connection takes it as its local port, and a server
# restarted on it then fails with "address in use" (seen: Bell restarted mid-test while four workers
# made connections). The band is split into slices; concurrent processes (pytest-xdist workers) each
# set their own slice in PORT_SLICE_VARIABLE, so they never hand out the same port. Within a process,
# ports are handed out in turn, so a port stays with its first owner (a service stopped for a moment
# keeps it) until the slice has gone round.
PORT_BAND = range(20000, 32768)
PORT_SLICES = 8
PORT_SLICE_VARIABLE = "YOVISION_PORT_SLICE"
_lock = threading.Lock()
_ports: Iterator[int] | None = None


def _slice_ports() -> Iterator[int]:
    size = len(PORT_BAND) // PORT_SLICES
    start = PORT_BAND.start + (int(os.environ.get(PORT_SLICE_VARIABLE, "0")) % PORT_SLICES) * size
    first = random.randrange(size)  # spreads the processes that share a slice (a worker and its children)
    return itertools.cycle([start + (first + i) % size for i in range(size)])


def free_port() -> int:
    """A loopback TCP port free right now (for a child process to bind), from this process's slice."""
    global _ports
    with _lock:
        if _ports is None:
            _ports = _slice_ports()
        for port in itertools.islice(_ports, len(PORT_BAND) // PORT_SLICES):
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise OSError("no free loopback port in this process's slice")


def write_private_file(path: Path, content: str) -> Path:
    """Write `content` to `path` readable by the owner only (0600), as the services demand of secret files;
    the file never exists with wider permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(content)
    os.chmod(path, 0o600)
    return path


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """SIGTERM to a child process this process started, SIGKILL if it has not exited after `timeout` s."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
