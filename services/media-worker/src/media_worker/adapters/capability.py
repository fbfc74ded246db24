"""This instance's capability as a small JSON file (`MEDIA_CAPABILITY_FILE`), written atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["CapabilityFile"]


class CapabilityFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def publish(self, instance_id: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f"{self.path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"instance_id": instance_id, "pid": os.getpid()}), encoding="utf-8")
        os.replace(partial, self.path)

    def read(self) -> str | None:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        value = document.get("instance_id") if isinstance(document, dict) else None
        return value if isinstance(value, str) else None
