"""Domain errors of signal-watcher, each with a stable snake_case code.

PlatformError
└── ValidationFailed      a watcher definition breaks a rule (code names the rule, e.g. too_many_headers)
    └── UrlRefused        a probe URL is malformed (url_* codes)
        └── TargetForbidden   the SSRF policy refuses the URL's host or address (ssrf_* codes): a policy
                              of the deployment (its allow-list) and of DNS at that moment, so 403, not 422
"""

from __future__ import annotations

from yovision_platform.errors import PlatformError

__all__ = ["TargetForbidden", "UrlRefused", "ValidationFailed"]


class ValidationFailed(PlatformError):
    code = "validation_failed"


class UrlRefused(ValidationFailed):
    code = "url_refused"


class TargetForbidden(UrlRefused):
    code = "ssrf_blocked"
