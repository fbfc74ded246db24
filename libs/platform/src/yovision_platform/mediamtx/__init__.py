"""MediaMTX: the Control API client and the registered fleet of media servers.

The modules below are private; import the names listed in ``__all__`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yovision_platform._exports import lazy_exports

if TYPE_CHECKING:
    from yovision_platform.mediamtx._client import LIST_MAX_PAGES as LIST_MAX_PAGES
    from yovision_platform.mediamtx._client import LIST_PAGE_ITEMS as LIST_PAGE_ITEMS
    from yovision_platform.mediamtx._client import MANAGED_PATH_NAME_MAX_CHARS as MANAGED_PATH_NAME_MAX_CHARS
    from yovision_platform.mediamtx._client import MANAGED_PATH_NAME_PATTERN as MANAGED_PATH_NAME_PATTERN
    from yovision_platform.mediamtx._client import REASON_MAX_CHARS as REASON_MAX_CHARS
    from yovision_platform.mediamtx._client import RESERVED_PATH_NAMES as RESERVED_PATH_NAMES
    from yovision_platform.mediamtx._client import MediaMtxApi as MediaMtxApi
    from yovision_platform.mediamtx._client import MediaMtxCredentials as MediaMtxCredentials
    from yovision_platform.mediamtx._client import MediaMtxError as MediaMtxError
    from yovision_platform.mediamtx._client import is_managed_path_name as is_managed_path_name
    from yovision_platform.mediamtx._client import redacted_reason as redacted_reason
    from yovision_platform.mediamtx._client import validate_api_url as validate_api_url
    from yovision_platform.mediamtx._media_servers import MAX_MEDIA_SERVERS as MAX_MEDIA_SERVERS
    from yovision_platform.mediamtx._media_servers import MEDIA_SERVER_ID_PATTERN as MEDIA_SERVER_ID_PATTERN
    from yovision_platform.mediamtx._media_servers import SINGLE_MEDIA_SERVER_ID as SINGLE_MEDIA_SERVER_ID
    from yovision_platform.mediamtx._media_servers import FleetClient as FleetClient
    from yovision_platform.mediamtx._media_servers import MediaFleet as MediaFleet
    from yovision_platform.mediamtx._media_servers import MediaServer as MediaServer
    from yovision_platform.mediamtx._media_servers import MediaServerEntry as MediaServerEntry
    from yovision_platform.mediamtx._media_servers import MediaServerSettings as MediaServerSettings
    from yovision_platform.mediamtx._media_servers import validate_media_server_id as validate_media_server_id

__all__ = [
    "LIST_MAX_PAGES",
    "LIST_PAGE_ITEMS",
    "MANAGED_PATH_NAME_MAX_CHARS",
    "MANAGED_PATH_NAME_PATTERN",
    "MAX_MEDIA_SERVERS",
    "MEDIA_SERVER_ID_PATTERN",
    "REASON_MAX_CHARS",
    "RESERVED_PATH_NAMES",
    "SINGLE_MEDIA_SERVER_ID",
    "FleetClient",
    "MediaFleet",
    "MediaMtxApi",
    "MediaMtxCredentials",
    "MediaMtxError",
    "MediaServer",
    "MediaServerEntry",
    "MediaServerSettings",
    "is_managed_path_name",
    "redacted_reason",
    "validate_api_url",
    "validate_media_server_id",
]

__getattr__ = lazy_exports(__name__, __file__)
