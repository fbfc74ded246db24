"""Device input validation. Every check raises `InvalidDeviceInput(field)`; the value never appears in
errors."""

from __future__ import annotations

import enum
import re

from sense_reconciler.domain import limits
from sense_reconciler.domain.errors import InvalidDeviceInput, MediaServerNotRegistered, SiteLimitReached
from sense_reconciler.domain.source_uri import is_source_uri
from yovision_platform.mediamtx import (
    MANAGED_PATH_NAME_PATTERN,
    MEDIA_SERVER_ID_PATTERN,
    RESERVED_PATH_NAMES,
    is_managed_path_name,
)
from yovision_platform.patterns import anchored

ID_PATTERN = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{limits.ID_MAX_CHARS - 1}}}")
# The audit actor: the subject of a verified access token (a user's `sub`, or a machine client's id), so
# exactly the platform's subject rule, 1..128 of [A-Za-z0-9._:@-]; the audit push contract to Bell takes the
# same (tests/unit/sense_reconciler/test_actor.py proves all three equal).
ACTOR_PATTERN = re.compile(rf"[A-Za-z0-9._:@-]{{1,{limits.ACTOR_MAX_CHARS}}}")

# What the validators below accept, as the published (JSON Schema) patterns of the Control API; the unit
# tests prove each one equal to its validator (tests/unit/sense_reconciler/test_published_patterns.py).
PUBLISHED_ID = anchored(ID_PATTERN.pattern)
PUBLISHED_NAME = r"^\s*[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?\s*$"
PUBLISHED_PATH_NAME = anchored(
    "(?!(?:" + "|".join(sorted(RESERVED_PATH_NAMES)) + ")$)" + MANAGED_PATH_NAME_PATTERN.pattern
)


class DesiredState(enum.StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


def validate_id(value: str, field: str) -> str:
    if ID_PATTERN.fullmatch(value) is None:
        raise InvalidDeviceInput(field)
    return value


def validate_name(value: str) -> str:
    stripped = value.strip()
    if not stripped or len(stripped) > limits.DEVICE_NAME_MAX_CHARS:
        raise InvalidDeviceInput("name")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in stripped):
        raise InvalidDeviceInput("name")
    return stripped


def validate_path_name(value: str) -> str:
    if not is_managed_path_name(value):
        raise InvalidDeviceInput("path_name")
    return value


def validate_media_server_id(value: str, registered: frozenset[str]) -> str:
    """An operator-defined server id (format), and one this deployment registered."""
    if MEDIA_SERVER_ID_PATTERN.fullmatch(value) is None:
        raise InvalidDeviceInput("media_server_id")
    if value not in registered:
        raise MediaServerNotRegistered()
    return value


def validate_source_uri(value: str) -> str:
    """An RTSP(S) URL that MediaMTX accepts and can pull (`domain/source_uri.py`)."""
    if not is_source_uri(value):
        raise InvalidDeviceInput("source_uri")
    return value


def validate_actor(value: str) -> str:
    if ACTOR_PATTERN.fullmatch(value) is None:
        raise InvalidDeviceInput("actor")
    return value


def validate_max_video_channels(value: int) -> int:
    if not limits.SITE_MAX_VIDEO_CHANNELS_MIN <= value <= limits.SITE_MAX_VIDEO_CHANNELS_MAX:
        raise InvalidDeviceInput("max_video_channels")
    return value


def validate_batch_size(count: int) -> int:
    if not 1 <= count <= limits.SET_DESIRED_STATE_BATCH_MAX_ITEMS:
        raise InvalidDeviceInput("items")
    return count


def validate_page_size(value: int) -> int:
    if not 1 <= value <= limits.LIST_PAGE_SIZE_MAX:
        raise InvalidDeviceInput("limit")
    return value


def check_site_capacity(enabled_now: int, enabling: int, max_video_channels: int) -> None:
    """Refuse when `enabling` more enabled devices would exceed the site's limit."""
    if enabled_now + enabling > max_video_channels:
        raise SiteLimitReached()
