"""Composition root of sense-reconciler: `sense-reconciler serve | migrate | check-config`."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from sense_reconciler.settings import SenseReconcilerSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec(
    name="sense-reconciler",
    version=importlib.metadata.version("sense-reconciler"),
    schema="sense",
    settings_cls=SenseReconcilerSettings,
    migrations_dir=Path(__file__).resolve().parent.parent / "migrations",
)


def main() -> None:
    sys.exit(run(SPEC))
