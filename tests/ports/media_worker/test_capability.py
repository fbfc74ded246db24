"""The capability port: unknown until published, then the last published instance id. (A malformed file
reads as unknown too, below.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from media_worker.adapters.capability import CapabilityFile
from media_worker.adapters.memory import MemoryCapability
from media_worker.service_layer.ports import Capability


class CapabilityContract:
    """Its test classes provide the `capability` fixture."""

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

    @pytest.mark.parametrize("text", ['{"pid": 1}', '{"instance_id": 7}', "[]", "not json", ""])
    def test_a_malformed_file_reads_as_unknown(self, tmp_path: Path, text: str) -> None:
        capability = CapabilityFile(tmp_path / "media-worker.capability")
        capability.publish("media-a")
        capability.path.write_text(text, encoding="utf-8")
        assert capability.read() is None

    def test_the_file_is_replaced_whole(self, tmp_path: Path) -> None:
        capability = CapabilityFile(tmp_path / "media-worker.capability")
        capability.publish("media-a")
        capability.publish("media-b")
        assert [p.name for p in tmp_path.iterdir()] == ["media-worker.capability"]


class TestMemoryCapability(CapabilityContract):
    @pytest.fixture
    def capability(self, tmp_path: Path) -> Capability:
        return MemoryCapability()
