"""Composition root of orphan-scanner: `orphan-scanner serve | migrate | check-config`."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec(
    name="orphan-scanner",
    version=importlib.metadata.version("orphan-scanner"),
    schema="orphan",
    settings_cls=OrphanScannerSettings,
    migrations_dir=Path(__file__).resolve().parent.parent / "migrations",
)


def main() -> None:
    sys.exit(run(SPEC))
