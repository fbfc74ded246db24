"""Web: the process shell (``ServiceSpec``, workers, start-up), the FastAPI app, problems,
request guards, access tokens and permissions, paging cursors.

The modules below are private; import the names listed in ``__all__`` from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yovision_platform._exports import lazy_exports

if TYPE_CHECKING:
    from yovision_platform.web._access_tokens import KEY_BEARING_HEADERS as KEY_BEARING_HEADERS
    from yovision_platform.web._access_tokens import AccessTokenCaller as AccessTokenCaller
    from yovision_platform.web._access_tokens import AccessTokenMetrics as AccessTokenMetrics
    from yovision_platform.web._access_tokens import AccessTokenSettings as AccessTokenSettings
    from yovision_platform.web._access_tokens import AccessTokenVerifier as AccessTokenVerifier
    from yovision_platform.web._access_tokens import PermissionMapping as PermissionMapping
    from yovision_platform.web._access_tokens import Refusal as Refusal
    from yovision_platform.web._access_tokens import TokenRefused as TokenRefused
    from yovision_platform.web._access_tokens import checked_url as checked_url
    from yovision_platform.web._access_tokens import use_access_token_verifier as use_access_token_verifier
    from yovision_platform.web._access_tokens import use_access_tokens as use_access_tokens
    from yovision_platform.web._access_tokens import verified_claims as verified_claims
    from yovision_platform.web._app import JSON_INTEGER as JSON_INTEGER
    from yovision_platform.web._app import JsonInt as JsonInt
    from yovision_platform.web._app import Rfc3339DateTime as Rfc3339DateTime
    from yovision_platform.web._app import create_app as create_app
    from yovision_platform.web._app import guard_policy as guard_policy
    from yovision_platform.web._app import with_problem_responses as with_problem_responses
    from yovision_platform.web._auth import DECODE_OPTIONS as DECODE_OPTIONS
    from yovision_platform.web._auth import JWT_LEEWAY_SECONDS_DEFAULT as JWT_LEEWAY_SECONDS_DEFAULT
    from yovision_platform.web._auth import PERMISSION_PATTERN as PERMISSION_PATTERN
    from yovision_platform.web._auth import SUBJECT_PATTERN as SUBJECT_PATTERN
    from yovision_platform.web._auth import AuthError as AuthError
    from yovision_platform.web._auth import BearerToken as BearerToken
    from yovision_platform.web._auth import Forbidden as Forbidden
    from yovision_platform.web._auth import Identity as Identity
    from yovision_platform.web._auth import bearer_token as bearer_token
    from yovision_platform.web._auth import check_times as check_times
    from yovision_platform.web._auth import checked_subject as checked_subject
    from yovision_platform.web._guards import DEFAULT_BODY_READ_SECONDS as DEFAULT_BODY_READ_SECONDS
    from yovision_platform.web._guards import NUL_FREE_PATTERN as NUL_FREE_PATTERN
    from yovision_platform.web._guards import BodyReadRule as BodyReadRule
    from yovision_platform.web._guards import RequestGuardPolicy as RequestGuardPolicy
    from yovision_platform.web._guards import RequestGuards as RequestGuards
    from yovision_platform.web._jwks import ASYMMETRIC_ALGORITHMS as ASYMMETRIC_ALGORITHMS
    from yovision_platform.web._jwks import JWKS_MAX_BYTES as JWKS_MAX_BYTES
    from yovision_platform.web._jwks import FetchOutcome as FetchOutcome
    from yovision_platform.web._jwks import IssuerKeys as IssuerKeys
    from yovision_platform.web._jwks import JwksKey as JwksKey
    from yovision_platform.web._paging import MAX_CURSOR_CHARS as MAX_CURSOR_CHARS
    from yovision_platform.web._paging import InvalidCursor as InvalidCursor
    from yovision_platform.web._paging import KeysetPage as KeysetPage
    from yovision_platform.web._paging import cursor_pattern as cursor_pattern
    from yovision_platform.web._paging import cursor_query as cursor_query
    from yovision_platform.web._paging import decode_cursor as decode_cursor
    from yovision_platform.web._paging import encode_cursor as encode_cursor
    from yovision_platform.web._permissions import AUDIENCES as AUDIENCES
    from yovision_platform.web._permissions import PERMISSIONS as PERMISSIONS
    from yovision_platform.web._problems import BROKER_RETRY_AFTER_SECONDS as BROKER_RETRY_AFTER_SECONDS
    from yovision_platform.web._problems import DATABASE_RETRY_AFTER_SECONDS as DATABASE_RETRY_AFTER_SECONDS
    from yovision_platform.web._problems import PROBLEM_MEDIA_TYPE as PROBLEM_MEDIA_TYPE
    from yovision_platform.web._problems import Problem as Problem
    from yovision_platform.web._problems import install_problem_handlers as install_problem_handlers
    from yovision_platform.web._problems import problem_response as problem_response
    from yovision_platform.web._service import ServiceCommand as ServiceCommand
    from yovision_platform.web._service import ServiceContext as ServiceContext
    from yovision_platform.web._service import ServiceSpec as ServiceSpec
    from yovision_platform.web._service import WebContext as WebContext
    from yovision_platform.web._service import WebServiceSpec as WebServiceSpec
    from yovision_platform.web._service import checked_pool as checked_pool
    from yovision_platform.web._service import main as main
    from yovision_platform.web._service import migrations_dir_of as migrations_dir_of
    from yovision_platform.web._service import schema_of as schema_of

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "AUDIENCES",
    "BROKER_RETRY_AFTER_SECONDS",
    "DATABASE_RETRY_AFTER_SECONDS",
    "DECODE_OPTIONS",
    "DEFAULT_BODY_READ_SECONDS",
    "JSON_INTEGER",
    "JWKS_MAX_BYTES",
    "JWT_LEEWAY_SECONDS_DEFAULT",
    "KEY_BEARING_HEADERS",
    "MAX_CURSOR_CHARS",
    "NUL_FREE_PATTERN",
    "PERMISSIONS",
    "PERMISSION_PATTERN",
    "PROBLEM_MEDIA_TYPE",
    "SUBJECT_PATTERN",
    "AccessTokenCaller",
    "AccessTokenMetrics",
    "AccessTokenSettings",
    "AccessTokenVerifier",
    "AuthError",
    "BearerToken",
    "BodyReadRule",
    "FetchOutcome",
    "Forbidden",
    "Identity",
    "InvalidCursor",
    "IssuerKeys",
    "JsonInt",
    "JwksKey",
    "KeysetPage",
    "PermissionMapping",
    "Problem",
    "Refusal",
    "RequestGuardPolicy",
    "RequestGuards",
    "Rfc3339DateTime",
    "ServiceCommand",
    "ServiceContext",
    "ServiceSpec",
    "TokenRefused",
    "WebContext",
    "WebServiceSpec",
    "bearer_token",
    "check_times",
    "checked_pool",
    "checked_subject",
    "checked_url",
    "create_app",
    "cursor_pattern",
    "cursor_query",
    "decode_cursor",
    "encode_cursor",
    "guard_policy",
    "install_problem_handlers",
    "main",
    "migrations_dir_of",
    "problem_response",
    "schema_of",
    "use_access_token_verifier",
    "use_access_tokens",
    "verified_claims",
    "with_problem_responses",
]

__getattr__ = lazy_exports(__name__, __file__)
