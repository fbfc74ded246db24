"""Composition root of signal-watcher: `signal-watcher serve | migrate | check-config`."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from signal_watcher.settings import SignalWatcherSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec(
    name="signal-watcher",
    version=importlib.metadata.version("signal-watcher"),
    schema="signal",
    settings_cls=SignalWatcherSettings,
    migrations_dir=Path(__file__).resolve().parent.parent / "migrations",
)


def main() -> None:
    sys.exit(run(SPEC))
