"""Domain errors, each with a stable snake_case code (safe for API bodies, metrics and audit rows).

SenseError                      code = "sense_error"
├── InvalidInput                code = "invalid_<field>"  (.field: the offending input field)
├── DeviceNotFound              code = "device_not_found"
├── PathNameTaken               code = "path_name_taken"
├── SiteLimitReached            code = "site_video_channel_limit_reached"
└── MediaServerNotRegistered    code = "media_server_not_registered"
"""

from __future__ import annotations


class SenseError(Exception):
    code = "sense_error"

    def __init__(self, code: str | None = None) -> None:
        if code is not None:
            self.code = code
        super().__init__(self.code)


class InvalidInput(SenseError):
    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"invalid_{field}")


class DeviceNotFound(SenseError):
    code = "device_not_found"


class PathNameTaken(SenseError):
    code = "path_name_taken"


class SiteLimitReached(SenseError):
    code = "site_video_channel_limit_reached"


class MediaServerNotRegistered(SenseError):
    code = "media_server_not_registered"
