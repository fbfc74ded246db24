"""Composition root of media-worker: `media-worker serve | migrate | check-config`."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from media_worker.settings import MediaWorkerSettings
from yovision_platform.service import ServiceSpec
from yovision_platform.service import main as run

SPEC = ServiceSpec(
    name="media-worker",
    version=importlib.metadata.version("media-worker"),
    schema="media",
    settings_cls=MediaWorkerSettings,
    migrations_dir=Path(__file__).resolve().parent.parent / "migrations",
)


def main() -> None:
    sys.exit(run(SPEC))
