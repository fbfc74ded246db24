"""Throwaway TLS material for tests: self-signed certificates for 127.0.0.1, a CA and the certificates it
signs, each with its private key (0600). Made with openssl, valid one day."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertificateAuthority", "self_signed"]


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


EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]


@dataclass(frozen=True)
class CertificateAuthority:
    """A throwaway CA (`cert` is its PEM certificate, the file a client trusts)."""

    cert: Path
    key: Path

    @classmethod
    def create(cls, directory: Path, name: str) -> CertificateAuthority:
        cert, key = directory / f"{name}.crt", directory / f"{name}.key"
        subprocess.run(
            ["openssl", "req", "-x509", *EC_KEY, "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
             "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        os.chmod(key, 0o600)
        return cls(cert, key)

    def issue(self, directory: Path, name: str, *, ip: str = "127.0.0.1") -> tuple[Path, Path]:
        """`<name>.crt` (for `ip`, signed by this CA) and `<name>.key`."""
        cert, key = directory / f"{name}.crt", directory / f"{name}.key"
        subprocess.run(
            ["openssl", "req", "-x509", *EC_KEY, "-CA", str(self.cert), "-CAkey", str(self.key),
             "-subj", f"/CN={ip}", "-addext", f"subjectAltName=IP:{ip}",
             "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )  # fmt: skip
        os.chmod(key, 0o600)
        return cert, key
