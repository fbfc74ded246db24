"""Small helpers for local tooling, tests and benchmarks: a free loopback port, a private secret file."""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["free_port", "write_private_file"]


def free_port() -> int:
    """A loopback TCP port free right now (for a child process to bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_private_file(path: Path, content: str) -> Path:
    """Write `content` to `path` readable by the owner only (0600), as the services demand of secret files;
    the file never exists with wider permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(content)
    os.chmod(path, 0o600)
    return path
