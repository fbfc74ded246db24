"""The provider's login, consent and logout requests, as the console's dev login pages handle them (ORY
Hydra's admin API, on a loopback address of the local stack only).

Every call goes through the platform's `HydraAdmin`; a login is accepted with `remember`, so the provider
keeps a session, which sign-out then ends. Errors: `ChallengeRefused` (the provider does not know the
challenge, or no longer: used, expired) and `ProviderUnavailable` (no answer, or a server error). The
redirect the provider answers with must lead to the provider itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from console.adapters.openid import origin_of
from console.service_layer.ports import ProviderUnavailable
from yovision_platform.tools.hydra import HydraAdmin, HydraAdminError

__all__ = ["ChallengeRefused", "ConsentRequest", "LoginAdmin", "LoginRequest"]

CONTEXT_PERMISSIONS = "permissions"  # the login context's key: the permissions the user chose


class ChallengeRefused(Exception):
    """The provider refused the challenge (unknown, used or expired)."""


@dataclass(frozen=True)
class LoginRequest:
    skip: bool  # the provider remembers this browser's login: the subject is fixed
    subject: str
    requested_scope: tuple[str, ...]


@dataclass(frozen=True)
class ConsentRequest:
    requested_scope: tuple[str, ...]
    requested_audiences: tuple[str, ...]
    allowed_permissions: frozenset[str]  # what the login allowed (its context)


class LoginAdmin:
    """`admin_url`: the provider's admin API; `public_origin`: where its redirects must lead."""

    def __init__(self, admin_url: str, public_origin: str, http: httpx.AsyncClient) -> None:
        self._public_origin = public_origin
        self._admin = HydraAdmin(admin_url, http)

    async def login_request(self, challenge: str) -> LoginRequest:
        body = await self._call(self._admin.login_request(challenge))
        return LoginRequest(
            skip=body.get("skip") is True,
            subject=str(body.get("subject") or ""),
            requested_scope=_strings(body.get("requested_scope")),
        )

    async def accept_login(
        self, challenge: str, subject: str, permissions: Sequence[str], *, remember_seconds: int
    ) -> str:
        """Accepts the login as `subject`, allowing `permissions` (the login's context, which the consent
        reads), remembered by the provider for `remember_seconds`. The URL to send the browser on to."""
        redirect = await self._call(
            self._admin.accept_login(
                challenge,
                subject,
                {CONTEXT_PERMISSIONS: list(permissions)},
                remember_seconds=remember_seconds,
            )
        )
        return self._leads_to_the_provider(redirect)

    async def consent_request(self, challenge: str) -> ConsentRequest:
        body = await self._call(self._admin.consent_request(challenge))
        context = body.get("context")
        allowed = context.get(CONTEXT_PERMISSIONS) if isinstance(context, Mapping) else None
        return ConsentRequest(
            requested_scope=_strings(body.get("requested_scope")),
            requested_audiences=_strings(body.get("requested_access_token_audience")),
            allowed_permissions=frozenset(_strings(allowed)),
        )

    async def accept_consent(self, challenge: str, scopes: Sequence[str], audiences: Sequence[str]) -> str:
        redirect = await self._call(self._admin.accept_consent(challenge, scopes, audiences))
        return self._leads_to_the_provider(redirect)

    async def accept_logout(self, challenge: str) -> str:
        """Accepts the logout: the provider ends its session, then sends the browser where the sign-out
        asked (the console's post-logout URL)."""
        return self._leads_to_the_provider(await self._call(self._admin.accept_logout(challenge)))

    async def _call(self, call: Any) -> Any:
        try:
            return await call
        except (httpx.HTTPError, ValueError, KeyError):  # no answer, or no JSON redirect in it
            raise ProviderUnavailable() from None
        except HydraAdminError as refused:
            raise (ProviderUnavailable() if refused.status >= 500 else ChallengeRefused()) from None

    def _leads_to_the_provider(self, redirect: object) -> str:
        if not isinstance(redirect, str) or origin_of(redirect) != self._public_origin:
            raise ProviderUnavailable()
        return redirect


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v for v in value if isinstance(v, str))
