"""Composition root of orphan-scanner: `orphan-scanner serve | migrate | check-config`."""

from __future__ import annotations

import sys
from pathlib import Path

from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec(
    name="orphan-scanner",
    schema="orphan",
    settings_cls=OrphanScannerSettings,
    migrations_dir=Path(__file__).resolve().parent.parent / "migrations",
)


def main() -> None:
    sys.exit(run(SPEC))
