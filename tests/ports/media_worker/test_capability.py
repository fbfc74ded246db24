"""The capability port: unknown until published, then the last published instance id. (A malformed file
reads as unknown too: tests/integration/media_worker/test_drain.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from media_worker.adapters.capability import CapabilityFile
from media_worker.adapters.memory import InMemoryCapability
from media_worker.service_layer.ports import Capability


class CapabilityContract:
    @pytest.fixture
    def capability(self, tmp_path: Path) -> Capability:
        raise NotImplementedError

    def test_unknown_until_published(self, capability: Capability) -> None:
        assert capability.read() is None

    def test_the_last_published_instance_id_is_read(self, capability: Capability) -> None:
        capability.publish("media-a")
        assert capability.read() == "media-a"
        capability.publish("media-b")
        assert capability.read() == "media-b"


class TestCapabilityFile(CapabilityContract):
    @pytest.fixture
    def capability(self, tmp_path: Path) -> Capability:
        return CapabilityFile(tmp_path / "run" / "media-worker.capability")


class TestInMemoryCapability(CapabilityContract):
    @pytest.fixture
    def capability(self, tmp_path: Path) -> Capability:
        return InMemoryCapability()
