"""The refusals of sense-reconciler: `ServiceError`s with a stable snake_case code (safe for API bodies,
metrics and audit rows) and the HTTP status the Control API answers them with (yovision_platform.web).

SenseError                      code = "sense_error"                        400
├── InvalidDeviceInput          code = "invalid_<field>"                    422  (.field: the input field)
├── DeviceNotFound              code = "device_not_found"                   404
├── PathNameTaken               code = "path_name_taken"                    409
├── SiteLimitReached            code = "site_video_channel_limit_reached"   409
└── MediaServerNotRegistered    code = "media_server_not_registered"        409  (well-formed, but this
                                                                                  deployment has no such
                                                                                  server: its state)
"""

from __future__ import annotations

from yovision_platform.errors import ServiceError


class SenseError(ServiceError):
    code = "sense_error"
    status = 400


class InvalidDeviceInput(SenseError):
    status = 422

    def __init__(self, field: str) -> None:
        self.field = field
        super().__init__(f"invalid_{field}")


class DeviceNotFound(SenseError):
    code = "device_not_found"
    status = 404


class PathNameTaken(SenseError):
    code = "path_name_taken"
    status = 409


class SiteLimitReached(SenseError):
    code = "site_video_channel_limit_reached"
    status = 409


class MediaServerNotRegistered(SenseError):
    code = "media_server_not_registered"
    status = 409
