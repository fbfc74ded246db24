"""Composition root of orphan-scanner: `orphan-scanner serve | migrate | check-config`."""

from __future__ import annotations

import sys

from orphan_scanner.settings import OrphanScannerSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec.for_package(
    "orphan-scanner", package="orphan_scanner", schema="orphan", settings_cls=OrphanScannerSettings
)


def main() -> None:
    sys.exit(run(SPEC))
