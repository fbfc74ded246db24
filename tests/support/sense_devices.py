"""A body of Sense's `POST /v1/devices`, for the Control API tests of every tier."""

from __future__ import annotations

import uuid


def device_body(*, userinfo: str = "admin:pw", **overrides: object) -> dict[str, object]:
    """A valid device with a fresh path name; `userinfo`: the source URI's user and password (a secret the
    test may look for in logs and answers)."""
    return {
        "tenant_id": "tenant-a",
        "site_id": "site-1",
        "name": "Lobby",
        "path_name": f"p-{uuid.uuid4().hex[:12]}",
        "source_uri": f"rtsp://{userinfo}@10.1.2.3/live",
        "desired_state": "enabled",
        **overrides,
    }
