"""The drain hook's token handling in process (files/media-drain.py, loaded from the chart as the ConfigMap
holds it), against a provider and an instance faked with httpx.MockTransport: what it asks the token
endpoint for, when it asks again (its token near expiry, or refused by the instance), and which discovery
answers it refuses to send its secret to. The end-to-end runs are tests/deploy/test_media_drain.py."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from tests.deploy.chart import CHART

ISSUER = "https://login.example.com/realms/yovision"
TOKEN_ENDPOINT = f"{ISSUER}/protocol/openid-connect/token"
DRAIN_URL = "http://127.0.0.1:18085/internal/drain"


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("media_drain", CHART / "files" / "media-drain.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


hook = load_hook()


class Provider:
    """Discovery and a token endpoint that issues token-1, token-2, ... each living `expires_in`."""

    def __init__(self, expires_in: object = 900, metadata: dict[str, Any] | None = None) -> None:
        self.expires_in = expires_in
        self.metadata = metadata or {"issuer": ISSUER, "token_endpoint": TOKEN_ENDPOINT}
        self.token_requests: list[dict[str, list[str]]] = []
        self.authorizations: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url == f"{ISSUER}/.well-known/openid-configuration":
            return httpx.Response(200, json=self.metadata)
        if request.method == "POST" and request.url == TOKEN_ENDPOINT:
            self.token_requests.append(parse_qs(request.content.decode()))
            self.authorizations.append(request.headers["authorization"])
            answer = {"access_token": f"token-{len(self.token_requests)}", "token_type": "bearer"}
            return httpx.Response(200, json={**answer, "expires_in": self.expires_in})
        return httpx.Response(404)


def instance(statuses: list[int], seen: list[str]) -> Callable[[httpx.Request], httpx.Response]:
    """Answers with the statuses in turn (then 200), recording each request's bearer token."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"].removeprefix("Bearer "))
        status = statuses.pop(0) if statuses else 200
        body = {"safe_to_stop": True, "draining": True} if status == 200 else {"error": "unauthorized"}
        return httpx.Response(status, json=body)

    return handle


def wired(provider: Provider, statuses: list[int], seen: list[str]) -> Any:
    issuer_http = httpx.Client(transport=httpx.MockTransport(provider.handle))
    client = hook.Client(issuer_http, ISSUER, "yovision-media-drain", "s3cret", "media:drain", "media-worker")
    instance_http = httpx.Client(transport=httpx.MockTransport(instance(statuses, seen)))
    return hook.Instance(instance_http, DRAIN_URL, client)


def test_it_asks_for_a_client_credentials_token_for_the_drain_audience_and_scope() -> None:
    provider, seen = Provider(), []
    report = wired(provider, [], seen).call("POST")
    assert report == {"safe_to_stop": True, "draining": True}
    (form,) = provider.token_requests
    assert form == {
        "grant_type": ["client_credentials"],
        "scope": ["media:drain"],
        "audience": ["media-worker"],
    }
    assert provider.authorizations == ["Basic eW92aXNpb24tbWVkaWEtZHJhaW46czNjcmV0"]  # client_secret_basic
    assert seen == ["token-1"]


def test_a_token_is_kept_while_it_lives_and_replaced_near_its_expiry() -> None:
    lasting, seen = Provider(expires_in=hook.TOKEN_MARGIN_SECONDS + 60), []
    drain = wired(lasting, [], seen)
    for method in ("POST", "GET", "GET"):
        drain.call(method)
    assert seen == ["token-1"] * 3
    expiring, seen = Provider(expires_in=hook.TOKEN_MARGIN_SECONDS), []  # within the margin at once
    drain = wired(expiring, [], seen)
    for method in ("POST", "GET"):
        drain.call(method)
    assert seen == ["token-1", "token-2"]


def test_a_token_the_instance_refuses_is_replaced_on_the_next_call() -> None:
    provider, seen = Provider(), []
    drain = wired(provider, [401], seen)
    assert drain.call("POST") is None  # unknown state: not drained
    assert drain.call("POST") == {"safe_to_stop": True, "draining": True}
    assert seen == ["token-1", "token-2"]


@pytest.mark.parametrize(
    "metadata",
    [
        {"issuer": "https://evil.example.com", "token_endpoint": TOKEN_ENDPOINT},
        {"issuer": ISSUER, "token_endpoint": "http://login.example.com/token"},  # plain http off loopback
        {"issuer": ISSUER},
        {"issuer": ISSUER, "token_endpoint": 7},
    ],
    ids=["other-issuer", "plain-http-endpoint", "no-endpoint", "not-a-url"],
)
def test_the_secret_goes_only_to_the_configured_issuers_token_endpoint(metadata: dict[str, Any]) -> None:
    provider, seen = Provider(metadata=metadata), []
    drain = wired(provider, [], seen)
    assert drain.call("POST") is None
    assert provider.token_requests == [] and seen == []


@pytest.mark.parametrize(
    "answer",
    [{"token_type": "bearer"}, {"access_token": ""}, {"access_token": 5}, ["token"]],
    ids=["no-token", "empty", "not-a-string", "not-an-object"],
)
def test_a_token_answer_without_a_token_is_no_token(answer: object) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"issuer": ISSUER, "token_endpoint": TOKEN_ENDPOINT})
        return httpx.Response(200, content=json.dumps(answer))

    client = hook.Client(httpx.Client(transport=httpx.MockTransport(handle)), ISSUER, "c", "s")
    with pytest.raises(hook.NoToken) as refused:
        client.token()
    assert refused.value.code == "token_invalid"
