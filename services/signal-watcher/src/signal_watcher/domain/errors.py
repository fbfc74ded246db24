"""Domain errors of signal-watcher, each with a stable snake_case code.

PlatformError
├── ValidationFailed   a watcher definition breaks a rule (code names the rule, e.g. too_many_headers)
└── UrlRefused         a probe URL or an address it resolves to is not allowed (ssrf_* codes)
"""

from __future__ import annotations

from yovision_platform.errors import PlatformError

__all__ = ["UrlRefused", "ValidationFailed"]


class ValidationFailed(PlatformError):
    code = "validation_failed"


class UrlRefused(ValidationFailed):
    code = "url_refused"
