"""Error pages: a service that does not answer is a 502 page naming it (the handler path completes: an
ApiError used to be a frozen dataclass, and Starlette's clearing of its traceback after the answer raised);
a missing permission is a 403 naming it; no dev login exists unless it is configured; what the framework
refuses (an unknown URL, a wrong method, a path id that is no id) is the error page for a browser and the
platform's problem for any other caller, neither echoing the request."""

from __future__ import annotations

import pytest

from console.domain.identity import SENSE_OPERATE
from tests.unit.console.conftest import ClientFactory, csrf_in, signed_in


@pytest.mark.parametrize(
    ("page", "service"),
    [("/inbox", "bell-receiver"), ("/watchers", "signal-watcher"), ("/media", "media-worker")],
)
async def test_a_service_that_does_not_answer_is_a_502_page_naming_it(
    console_env: dict[str, str], client_for: ClientFactory, page: str, service: str
) -> None:
    client = client_for()
    await signed_in(client, "alice")
    answer = await client.get(page)
    assert answer.status_code == 502
    assert "service_unavailable" in answer.text and service in answer.text
    assert "Bearer" not in answer.text and "eyJ" not in answer.text  # no token of the outbound call


async def test_a_page_without_its_permission_is_a_403_naming_it(
    console_env: dict[str, str], client_for: ClientFactory
) -> None:
    client = client_for()
    await signed_in(client, "alice")  # no permissions
    answer = await client.get("/devices")
    assert answer.status_code == 403 and SENSE_OPERATE in answer.text
    assert 'href="/devices"' not in answer.text  # the menu hides what the user cannot use


@pytest.mark.parametrize(
    "path",
    [
        "/oidc/login?login_challenge=abc",
        "/oidc/consent?consent_challenge=abc",
        "/oidc/logout?logout_challenge=abc",
    ],
)
async def test_without_the_dev_login_there_are_no_login_consent_or_logout_pages(
    console_env: dict[str, str], client_for: ClientFactory, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    monkeypatch.delenv("CONSOLE_DEV_LOGIN_ADMIN_URL")
    client = client_for(scheme="https")  # without the dev login the cookie is always Secure
    assert (await client.get(path)).status_code == 404
    csrf = csrf_in((await client.get("/oidc/error")).text)
    answer = await client.post("/oidc/login", data={"csrf": csrf, "subject": "mallory"})
    assert answer.status_code == 404 and "mallory" not in answer.text


BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/no-such-page-x7q", 404, "not_found"),
        ("/devices/not-an-id-x7q", 422, "invalid_request"),
        ("/sign-out", 405, "method_not_allowed"),
    ],
)
async def test_a_url_the_framework_refuses_is_the_error_page_for_a_browser_and_a_problem_otherwise(
    console_env: dict[str, str], client_for: ClientFactory, path: str, status: int, code: str
) -> None:
    client = client_for()
    await signed_in(client, "alice", SENSE_OPERATE)
    page = await client.get(path, headers=BROWSER)
    assert page.status_code == status and page.headers["content-type"].startswith("text/html")
    assert f"<code>{code}</code>" in page.text and "x7q" not in page.text  # never the request's input
    assert '<link rel="icon"' in page.text
    problem = await client.get(path)
    assert problem.status_code == status and problem.json()["code"] == code
    if status == 405:
        assert page.headers["allow"] == problem.headers["allow"] == "POST"
