"""`FakeProvider`: an OpenID provider shaped as ORY Hydra v2 (public and admin API in one app), served on
loopback for the console's unit tests, so the whole sign-in runs in process with real HTTP between the
console and the provider: discovery, JWKS, `/oauth2/auth` sending the browser to the console's login and
consent pages (long, Hydra-sized challenges), the admin API those pages call, the token endpoint
(`client_secret_basic`, PKCE S256, single-use codes, RS256 access and ID tokens for the granted audiences,
refresh tokens that rotate, and a reused one revoking its whole chain as Hydra does), revocation,
RP-initiated logout with the logout page, and the revocation of a subject's grants by an admin.

The real Hydra runs the same flows in the end-to-end tests (tests/e2e/test_console*.py); what this fake
claims of Hydra is what those tests prove of it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from jwt.algorithms import RSAAlgorithm

CLIENT_ID = "console"
ACCESS_TOKEN_TTL_SECONDS = 900
CHALLENGE_BYTES = 1024  # Hydra's challenges are 1.3-1.6 KB of text
SESSION_COOKIE = "fake_hydra_session"


@functools.cache
def _signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Flow:
    client_id: str
    redirect_uri: str
    state: str
    nonce: str
    code_challenge: str
    scopes: list[str]
    audiences: list[str]
    login_challenge: str
    skip: bool = False
    subject: str | None = None
    context: dict[str, Any] = field(default_factory=dict)
    remember: bool = False
    login_verifier: str | None = None
    consent_challenge: str | None = None
    consent_verifier: str | None = None
    granted_scopes: list[str] = field(default_factory=list)
    granted_audiences: list[str] = field(default_factory=list)
    code: str | None = None
    sid: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class Chain:
    """One grant's refresh tokens: every rotation stays in the chain; a reuse revokes it."""

    subject: str
    scopes: list[str]
    audiences: list[str]
    sid: str
    revoked: bool = False


@dataclass
class LogoutRequest:
    challenge: str
    verifier: str
    sid: str
    redirect: str


@dataclass
class FakeProvider:
    client_secret: str
    issuer: str = ""
    console_origins: set[str] = field(default_factory=lambda: {"http://127.0.0.1"})
    clock: Callable[[], float] = time.time
    kid: str = field(default_factory=lambda: str(uuid.uuid4()))
    flows: list[Flow] = field(default_factory=list)
    chains: dict[str, Chain] = field(default_factory=dict)
    refresh_tokens: dict[str, tuple[str, bool]] = field(default_factory=dict)  # token -> (chain, active)
    sessions: dict[str, str] = field(default_factory=dict)  # remembered login: sid -> subject
    logouts: list[LogoutRequest] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    revocations: list[str] = field(default_factory=list)
    refresh_answers: list[Callable[[], Response] | None] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    # --- helpers for tests ------------------------------------------------------------------------------

    def redirect_uri_allowed(self, uri: str) -> bool:
        parts = urlsplit(uri)
        return parts.path == "/oidc/callback" and f"{parts.scheme}://{parts.netloc}" in self.console_origins

    def refreshes(self) -> int:
        return sum(1 for r in self.token_requests if r.get("grant_type") == "refresh_token")

    def revoke_subject(self, subject: str) -> None:
        """An admin revokes the subject's grants (Hydra: DELETE /admin/oauth2/auth/sessions/consent)."""
        for chain in self.chains.values():
            if chain.subject == subject:
                chain.revoked = True

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, _signing_key(), algorithm="RS256", headers={"kid": self.kid, "typ": "JWT"})

    # --- the app ---------------------------------------------------------------------------------------

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def record(request: Request, call_next: Any) -> Response:
            self.requests.append(f"{request.method} {request.url.path}")
            response: Response = await call_next(request)
            return response

        app.get("/.well-known/openid-configuration")(self._discovery)
        app.get("/.well-known/jwks.json")(self._jwks)
        app.get("/oauth2/auth")(self._authorize)
        app.post("/oauth2/token")(self._token)
        app.post("/oauth2/revoke")(self._revoke)
        app.get("/oauth2/sessions/logout")(self._logout)
        app.get("/admin/oauth2/auth/requests/login")(self._login_request)
        app.put("/admin/oauth2/auth/requests/login/accept")(self._accept_login)
        app.get("/admin/oauth2/auth/requests/consent")(self._consent_request)
        app.put("/admin/oauth2/auth/requests/consent/accept")(self._accept_consent)
        app.put("/admin/oauth2/auth/requests/logout/accept")(self._accept_logout)
        return app

    async def _discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/oauth2/auth",
            "token_endpoint": f"{self.issuer}/oauth2/token",
            "jwks_uri": f"{self.issuer}/.well-known/jwks.json",
            "revocation_endpoint": f"{self.issuer}/oauth2/revoke",
            "end_session_endpoint": f"{self.issuer}/oauth2/sessions/logout",
        }

    async def _jwks(self) -> dict[str, Any]:
        jwk = json.loads(RSAAlgorithm.to_jwk(_signing_key().public_key()))
        return {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def _flow(self, **match: str) -> Flow | None:
        name, value = next(iter(match.items()))
        return next((f for f in self.flows if getattr(f, name) == value), None)

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        if (verifier := q.get("login_verifier")) is not None:
            flow = self._flow(login_verifier=verifier)
            if flow is None:
                return JSONResponse({"error": "invalid_request"}, 400)
            flow.consent_challenge = secrets.token_urlsafe(CHALLENGE_BYTES)
            answer = RedirectResponse(
                f"{_origin(flow.redirect_uri)}/oidc/consent?consent_challenge={flow.consent_challenge}", 302
            )
            if flow.remember:
                self.sessions[flow.sid] = str(flow.subject)
                answer.set_cookie(SESSION_COOKIE, flow.sid, httponly=True, samesite="lax")
            return answer
        if (verifier := q.get("consent_verifier")) is not None:
            flow = self._flow(consent_verifier=verifier)
            if flow is None:
                return JSONResponse({"error": "invalid_request"}, 400)
            flow.code = secrets.token_urlsafe(32)
            return RedirectResponse(
                f"{flow.redirect_uri}?{urlencode({'code': flow.code, 'state': flow.state})}", 302
            )
        if (
            q.get("client_id") != CLIENT_ID
            or not self.redirect_uri_allowed(q.get("redirect_uri", ""))
            or q.get("response_type") != "code"
            or q.get("code_challenge_method") != "S256"
            or len(q.get("state", "")) < 8
        ):
            return JSONResponse({"error": "invalid_request"}, 400)
        flow = Flow(
            CLIENT_ID, q["redirect_uri"], q["state"], q.get("nonce", ""), q.get("code_challenge", ""),
            q.get("scope", "").split(), q.get("audience", "").split(), secrets.token_urlsafe(CHALLENGE_BYTES),
        )  # fmt: skip
        remembered = request.cookies.get(SESSION_COOKIE)
        if remembered in self.sessions:
            flow.skip, flow.subject, flow.sid = True, self.sessions[remembered], remembered
        self.flows.append(flow)
        return RedirectResponse(
            f"{_origin(flow.redirect_uri)}/oidc/login?login_challenge={flow.login_challenge}", 302
        )

    async def _login_request(self, login_challenge: str) -> Response:
        flow = self._flow(login_challenge=login_challenge)
        if flow is None or flow.login_verifier is not None:
            return JSONResponse({"error": "not_found"}, 404)
        return JSONResponse(
            {
                "challenge": login_challenge,
                "skip": flow.skip,
                "subject": flow.subject or "",
                "requested_scope": flow.scopes,
                "requested_access_token_audience": flow.audiences,
                "client": {"client_id": flow.client_id},
            }
        )

    async def _accept_login(self, login_challenge: str, request: Request) -> Response:
        flow = self._flow(login_challenge=login_challenge)
        body = await request.json()
        if flow is None or flow.login_verifier is not None:
            return JSONResponse({"error": "not_found"}, 404)
        if flow.skip and body.get("subject") != flow.subject:
            return JSONResponse({"error": "invalid_request"}, 400)
        flow.subject, flow.context = body["subject"], body.get("context") or {}
        flow.remember = body.get("remember") is True
        flow.login_verifier = secrets.token_urlsafe(32)
        return JSONResponse(
            {"redirect_to": f"{self.issuer}/oauth2/auth?login_verifier={flow.login_verifier}"}
        )

    async def _consent_request(self, consent_challenge: str) -> Response:
        flow = self._flow(consent_challenge=consent_challenge)
        if flow is None or flow.consent_verifier is not None:
            return JSONResponse({"error": "not_found"}, 404)
        return JSONResponse(
            {
                "challenge": consent_challenge,
                "subject": flow.subject,
                "requested_scope": flow.scopes,
                "requested_access_token_audience": flow.audiences,
                "context": flow.context,
                "skip": False,
            }
        )

    async def _accept_consent(self, consent_challenge: str, request: Request) -> Response:
        flow = self._flow(consent_challenge=consent_challenge)
        body = await request.json()
        if flow is None or flow.consent_verifier is not None:
            return JSONResponse({"error": "not_found"}, 404)
        flow.granted_scopes = list(body["grant_scope"])
        flow.granted_audiences = list(body["grant_access_token_audience"])
        flow.consent_verifier = secrets.token_urlsafe(32)
        return JSONResponse(
            {"redirect_to": f"{self.issuer}/oauth2/auth?consent_verifier={flow.consent_verifier}"}
        )

    def _client_ok(self, request: Request) -> bool:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        expected = base64.b64encode(f"{CLIENT_ID}:{self.client_secret}".encode()).decode()
        return secrets.compare_digest(encoded, expected)

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append(form)
        if not self._client_ok(request):
            return JSONResponse({"error": "invalid_client"}, 401)
        if form.get("grant_type") == "authorization_code":
            return self._exchange(form)
        if form.get("grant_type") == "refresh_token":
            planned = self.refresh_answers.pop(0) if self.refresh_answers else None
            if planned is not None:
                return planned()
            return self._refresh(form.get("refresh_token", ""))
        return JSONResponse({"error": "unsupported_grant_type"}, 400)

    def _exchange(self, form: dict[str, str]) -> Response:
        flow = self._flow(code=form.get("code", "")) if form.get("code") else None
        if flow is None or flow.redirect_uri != form.get("redirect_uri"):
            return JSONResponse({"error": "invalid_grant"}, 400)
        flow.code = None  # single use
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != flow.code_challenge:
            return JSONResponse({"error": "invalid_grant"}, 400)
        chain = str(uuid.uuid4())
        self.chains[chain] = Chain(str(flow.subject), flow.granted_scopes, flow.granted_audiences, flow.sid)
        return JSONResponse(self._tokens(chain, nonce=flow.nonce))

    def _refresh(self, token: str) -> Response:
        found = self.refresh_tokens.get(token)
        if found is None or self.chains[found[0]].revoked:
            return JSONResponse({"error": "invalid_grant"}, 400)
        chain, active = found
        if not active:  # reuse: taken as theft, the chain is revoked
            self.chains[chain].revoked = True
            return JSONResponse({"error": "invalid_grant"}, 400)
        self.refresh_tokens[token] = (chain, False)
        return JSONResponse(self._tokens(chain, nonce=None))

    def _tokens(self, chain_id: str, *, nonce: str | None) -> dict[str, Any]:
        chain = self.chains[chain_id]
        now = int(self.clock())
        access = self.sign(
            {
                "iss": self.issuer, "aud": chain.audiences, "sub": chain.subject, "client_id": CLIENT_ID,
                "scp": chain.scopes, "iat": now, "nbf": now, "exp": now + ACCESS_TOKEN_TTL_SECONDS,
                "jti": str(uuid.uuid4()), "ext": {},
            }
        )  # fmt: skip
        id_claims = {
            "iss": self.issuer, "aud": [CLIENT_ID], "sub": chain.subject, "sid": chain.sid, "iat": now,
            "exp": now + ACCESS_TOKEN_TTL_SECONDS, "auth_time": now, "rat": now, "jti": str(uuid.uuid4()),
            "at_hash": "x" * 22,
        }  # fmt: skip
        if nonce is not None:
            id_claims["nonce"] = nonce
        refresh = f"ory_rt_{secrets.token_urlsafe(64)}"
        self.refresh_tokens[refresh] = (chain_id, True)
        return {
            "access_token": access,
            "token_type": "bearer",
            "expires_in": ACCESS_TOKEN_TTL_SECONDS - 1,
            "refresh_token": refresh,
            "id_token": self.sign(id_claims),
            "scope": " ".join(chain.scopes),
        }

    async def _revoke(self, request: Request) -> Response:
        if not self._client_ok(request):
            return JSONResponse({"error": "invalid_client"}, 401)
        token = str((await request.form()).get("token", ""))
        self.revocations.append(token)
        if token in self.refresh_tokens:
            self.chains[self.refresh_tokens[token][0]].revoked = True
        return Response(status_code=200)

    async def _logout(self, request: Request) -> Response:
        q = request.query_params
        if (verifier := q.get("logout_verifier")) is not None:
            found = next((r for r in self.logouts if r.verifier == verifier), None)
            if found is None:
                return JSONResponse({"error": "invalid_request"}, 400)
            self.sessions.pop(found.sid, None)
            answer = RedirectResponse(found.redirect, 302)
            answer.delete_cookie(SESSION_COOKIE)
            return answer
        try:
            hint = jwt.decode(
                q.get("id_token_hint", ""),
                _signing_key().public_key(),
                algorithms=["RS256"],
                audience=CLIENT_ID,
                options={"verify_exp": False},
            )
        except jwt.PyJWTError:
            return JSONResponse({"error": "invalid_request"}, 400)
        target = q.get("post_logout_redirect_uri", "")
        if _origin(target) not in self.console_origins or urlsplit(target).path != "/":
            return JSONResponse({"error": "invalid_request"}, 400)
        redirect = f"{target}?{urlencode({'state': q.get('state', '')})}"
        if hint["sid"] not in self.sessions:
            return RedirectResponse(redirect, 302)
        request_ = LogoutRequest(
            secrets.token_urlsafe(CHALLENGE_BYTES), secrets.token_urlsafe(32), hint["sid"], redirect
        )
        self.logouts.append(request_)
        return RedirectResponse(f"{_origin(target)}/oidc/logout?logout_challenge={request_.challenge}", 302)

    async def _accept_logout(self, logout_challenge: str) -> Response:
        found = next((r for r in self.logouts if r.challenge == logout_challenge), None)
        if found is None:
            return JSONResponse({"error": "not_found"}, 404)
        return JSONResponse(
            {"redirect_to": f"{self.issuer}/oauth2/sessions/logout?logout_verifier={found.verifier}"}
        )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
