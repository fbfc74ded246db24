from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.platform.demo_settings import DEMO_BOOTSTRAP, GOOD_DSN, write_secret


@pytest.fixture
def demo_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """Only the required ``DEMO_`` settings in the environment: a bootstrap and a runtime DSN file."""
    for name in list(os.environ):
        if name.startswith("DEMO_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DEMO_KAFKA_BOOTSTRAP", DEMO_BOOTSTRAP)
    monkeypatch.setenv("DEMO_DATABASE_DSN_FILE", str(write_secret(tmp_path / "runtime.dsn", GOOD_DSN + "\n")))
    return monkeypatch
