"""Composition root of bell-receiver: `bell-receiver serve | migrate | check-config`."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from bell_receiver.settings import BellReceiverSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec(
    name="bell-receiver",
    version=importlib.metadata.version("bell-receiver"),
    schema="bell",
    settings_cls=BellReceiverSettings,
    migrations_dir=Path(__file__).resolve().parent.parent / "migrations",
)


def main() -> None:
    sys.exit(run(SPEC))
