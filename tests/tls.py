"""Throwaway TLS material for tests: a self-signed certificate for 127.0.0.1 and its private key (0600)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["self_signed"]


def self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    """`<name>.crt` (valid one day, for IP 127.0.0.1) and `<name>.key`, made with openssl."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    os.chmod(key, 0o600)
    return cert, key
