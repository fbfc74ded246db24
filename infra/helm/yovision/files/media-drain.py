"""preStop hook of media-worker: drain this instance, then wait until it reports it is safe to stop.

Runs inside the media-worker container, with the container's own environment:

    python media-drain.py --timeout-seconds N --client-id ID --client-secret-file PATH [--scope SCOPE]

It acts as a machine client of the identity provider: an access token by the `client_credentials` grant
from the token endpoint of ``MEDIA_AUTH_ISSUER`` (OIDC discovery), for the instance's audience
(``MEDIA_AUTH_AUDIENCE``, default ``media-worker``), scope ``media:drain`` (or SCOPE: Entra ID, for one,
wants ``api://<application id>/.default``), the client's secret read from PATH. With it, it sends
``POST /internal/drain`` to the instance on 127.0.0.1 and polls ``GET /internal/drain`` until
``safe_to_stop`` is true (docs/runbooks/draining-a-worker.md). When the instance serves HTTPS
(``MEDIA_HTTP_TLS_CERT_FILE``), the hook trusts exactly that certificate, without a name check: it calls
127.0.0.1, which the certificate does not name. A token that expires or is refused (401) is replaced by a
new one.

Exit 0 once drained. Exit 1 when the timeout passes first or the state stays unknown (no token, no answer):
"unknown means not drained". Either way the kubelet then sends SIGTERM, and the worker hands a running job
back with a fenced release, so nothing is lost; the pod's terminationGracePeriodSeconds covers the timeout
plus the shutdown. Exit 2 at once when the hook is not configured (no issuer, no secret file): waiting
cannot fix that. Standard output has only the drain reports; standard error says, once per change, why
there is no token (a stable code and an HTTP status, never a token, a secret or a provider's text).
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
from dataclasses import dataclass

import httpx

from yovision_platform.web import checked_url

AUDIENCE = "media-worker"  # the instance's audience unless MEDIA_AUTH_AUDIENCE names another
SCOPE = "media:drain"  # the permission the drain endpoints require
POLL_SECONDS = 2.0
REQUEST_TIMEOUT_SECONDS = 5.0
# A token is replaced this long before its `expires_in` runs out, so no request carries an expired one.
TOKEN_MARGIN_SECONDS = 30.0
ANSWER_MAX_BYTES = 64 * 1024


class NoToken(Exception):
    """No access token now; `code` says why (`issuer_unavailable`, `discovery_invalid`, `token_refused`,
    `token_invalid`), `status` is the HTTP status when there was one."""

    def __init__(self, code: str, status: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.status = status


@dataclass
class Client:
    """The hook's client at the issuer, and its current token (kept until it nears expiry or is refused)."""

    http: httpx.Client
    issuer: str
    client_id: str
    client_secret: str
    scope: str = SCOPE
    audience: str = AUDIENCE
    _token_endpoint: str | None = None
    _token: str | None = None
    _expires_at: float = 0.0

    def token(self) -> str:
        if self._token is None or time.monotonic() >= self._expires_at:
            self._token, self._expires_at = self._new_token()
        return self._token

    def forget_token(self) -> None:
        self._token = None

    def _json(self, response: httpx.Response, code: str) -> dict[str, object]:
        if len(response.content) > ANSWER_MAX_BYTES:
            raise NoToken(code, response.status_code)
        try:
            answer = response.json()
        except ValueError:
            raise NoToken(code, response.status_code) from None
        if not isinstance(answer, dict):
            raise NoToken(code, response.status_code)
        return answer

    def _discover(self) -> str:
        if self._token_endpoint is None:
            try:
                response = self.http.get(f"{self.issuer.rstrip('/')}/.well-known/openid-configuration")
            except httpx.HTTPError:
                raise NoToken("issuer_unavailable") from None
            if response.status_code != 200:
                raise NoToken("issuer_unavailable", response.status_code)
            metadata = self._json(response, "discovery_invalid")
            endpoint = metadata.get("token_endpoint")
            issuer = metadata.get("issuer")
            if not isinstance(issuer, str) or issuer.rstrip("/") != self.issuer.rstrip("/"):
                raise NoToken("discovery_invalid")
            if not isinstance(endpoint, str):
                raise NoToken("discovery_invalid")
            try:  # the client's secret goes there: https only (http on loopback)
                self._token_endpoint = checked_url(endpoint)
            except ValueError:
                raise NoToken("discovery_invalid") from None
        return self._token_endpoint

    def _new_token(self) -> tuple[str, float]:
        endpoint = self._discover()
        requested = time.monotonic()
        try:
            response = self.http.post(
                endpoint,
                data={"grant_type": "client_credentials", "scope": self.scope, "audience": self.audience},
                auth=(self.client_id, self.client_secret),
            )
        except httpx.HTTPError:
            raise NoToken("issuer_unavailable") from None
        if response.status_code != 200:
            code = "issuer_unavailable" if response.status_code >= 500 else "token_refused"
            raise NoToken(code, response.status_code)
        answer = self._json(response, "token_invalid")
        token, expires_in = answer.get("access_token"), answer.get("expires_in")
        if not isinstance(token, str) or not token:
            raise NoToken("token_invalid")
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
            return token, requested + max(expires_in - TOKEN_MARGIN_SECONDS, 0.0)
        return token, float("inf")  # no lifetime given: kept until the instance refuses it


@dataclass
class Instance:
    """This pod's media-worker, on 127.0.0.1."""

    http: httpx.Client
    url: str
    client: Client
    _said: tuple[str, int | None] | None = None

    def call(self, method: str) -> dict[str, object] | None:
        """The drain report, or None: no token, unreachable, timed out, refused, not a report."""
        try:
            token = self.client.token()
        except NoToken as missing:
            self._say(missing)
            return None
        self._said = None
        try:
            response = self.http.request(method, self.url, headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError:
            return None
        if response.status_code == 401:  # expired early or its key retired: a new token next time
            self.client.forget_token()
        if response.status_code != 200:
            return None
        try:
            report = response.json()
        except ValueError:
            return None
        return report if isinstance(report, dict) else None

    def _say(self, missing: NoToken) -> None:
        said = (missing.code, missing.status)
        if said != self._said:
            line = json.dumps({"no_token": missing.code, "status": missing.status})
            print(line, file=sys.stderr, flush=True)
            self._said = said


def instance_endpoint() -> tuple[str, ssl.SSLContext | bool]:
    """The drain URL of this pod's instance, and how to trust it."""
    port = int(os.environ["MEDIA_HTTP_PORT"])
    certificate = os.environ.get("MEDIA_HTTP_TLS_CERT_FILE")
    if not certificate:
        return f"http://127.0.0.1:{port}/internal/drain", False
    context = ssl.create_default_context(cafile=certificate)
    context.check_hostname = False  # the certificate itself is the only one trusted
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # trusted as it is, without its CA
    return f"https://127.0.0.1:{port}/internal/drain", context


class NotConfigured(Exception):
    """The hook cannot work as configured; the argument names the setting or option (never its value)."""


def configuration(args: argparse.Namespace) -> tuple[str, str, str, ssl.SSLContext | bool]:
    """The issuer, the client's secret, the instance's drain URL and how to trust it (the audience is
    ``MEDIA_AUTH_AUDIENCE``, as the instance's, or its default)."""
    try:
        issuer = checked_url(os.environ["MEDIA_AUTH_ISSUER"])
    except (KeyError, ValueError):
        raise NotConfigured("MEDIA_AUTH_ISSUER") from None
    try:
        with open(args.client_secret_file, encoding="utf-8") as file:
            secret = file.read().strip()
    except (OSError, ValueError):
        raise NotConfigured("--client-secret-file") from None
    if not secret:
        raise NotConfigured("--client-secret-file")
    try:
        url, verify = instance_endpoint()
    except (KeyError, ValueError):
        raise NotConfigured("MEDIA_HTTP_PORT") from None
    except OSError:  # ssl.SSLError included: not a certificate
        raise NotConfigured("MEDIA_HTTP_TLS_CERT_FILE") from None
    return issuer, secret, url, verify


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="media-drain", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-seconds", type=float, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret-file", required=True)
    parser.add_argument("--scope", default=SCOPE)
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout_seconds
    try:
        issuer, secret, url, verify = configuration(args)
    except NotConfigured as missing:
        print(f"media-drain: not configured: {missing}", file=sys.stderr)
        return 2
    timeout = httpx.Timeout(REQUEST_TIMEOUT_SECONDS)
    with (
        httpx.Client(timeout=timeout, follow_redirects=False) as to_issuer,
        httpx.Client(timeout=timeout, verify=verify, trust_env=False) as to_instance,
    ):
        audience = os.environ.get("MEDIA_AUTH_AUDIENCE") or AUDIENCE
        client = Client(to_issuer, issuer, args.client_id, secret, args.scope, audience)
        instance = Instance(to_instance, url, client)
        report = instance.call("POST")
        while True:
            print(json.dumps({"drain": report}), flush=True)
            if report is not None and report.get("safe_to_stop") is True:
                return 0
            if time.monotonic() + POLL_SECONDS > deadline:
                return 1
            time.sleep(POLL_SECONDS)
            report = instance.call("GET" if report is not None else "POST")


if __name__ == "__main__":
    sys.exit(main())
