"""A template reading a name its view did not pass fails instead of rendering it as empty.

The first device page passed its reconcile state as ``status=`` to a template that reads ``reconcile``; with
Jinja's default the page said "No reconcile state" for every device, the browser test waiting for
"converged" timed out, and the two concurrent API reads of that page were blamed (and made sequential)."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2 import UndefinedError

from console.entrypoints.templating import page_templates

DEVICE = {
    "id": "0b8f7f9e-63a4-4f3e-9d5e-0d9c8f7a6b5c",
    "name": "camera 1",
    "tenant_id": "t",
    "site_id": "s",
    "path_name": "cam-1",
    "desired_state": "enabled",
    "config_version": 1,
}
RECONCILE = {
    "device_id": DEVICE["id"],
    "status": "converged",
    "desired_generation": 2,
    "observed_generation": 2,
    "attempts": 1,
    "next_attempt_at": None,
    "last_result_at": "2026-12-01T10:00:00+00:00",
}
BASE = {
    "csrf": "token",
    "user": None,
    "flash": None,
    "path": "/devices/x",
    "request": None,
}


def _render(template: str, source: str | None = None, **context: Any) -> str:
    env = page_templates()
    found = env.from_string(source) if source is not None else env.get_template(template)
    return found.render(**context)


def test_the_device_page_shows_the_reconcile_state_it_is_given() -> None:
    html = _render("device.html", **BASE, device=DEVICE, reconcile=RECONCILE, traces=None)
    assert 'data-status="converged"' in html


def test_the_device_page_says_a_refused_configuration_waits_for_a_change_and_why() -> None:
    refused = {
        **RECONCILE,
        "status": "failed",
        "last_error_code": "mediamtx_http_400",
        "last_error_reason": "invalid source: <redacted>",
        "next_attempt_at": None,
    }
    html = _render("device.html", **BASE, device=DEVICE, reconcile=refused, traces=None)
    assert 'data-status="failed"' in html and 'data-refused="true"' in html
    assert "invalid source: &lt;redacted&gt;" in html, "MediaMTX's reason, escaped"
    retrying = {**refused, "last_error_reason": None, "next_attempt_at": "2026-12-01T10:00:05+00:00"}
    html = _render("device.html", **BASE, device=DEVICE, reconcile=retrying, traces=None)
    assert "data-refused" not in html and "2026-12-01 10:00:05 UTC" in html


def test_the_device_page_refuses_a_context_without_reconcile() -> None:
    """The context the first version passed. With Jinja's default Undefined this rendered."""
    with pytest.raises(UndefinedError, match="reconcile"):
        _render("device.html", **BASE, device=DEVICE, status=RECONCILE)


@pytest.mark.parametrize(
    "source",
    [
        "{{ missing }}",
        "{% if missing %}x{% endif %}",
        "{% for i in missing %}{% endfor %}",
        "{{ missing | length }}",
        "{{ missing == 1 }}",
        "{{ missing.attribute }}",
    ],
)
def test_any_use_of_a_name_nobody_passed_fails(source: str) -> None:
    with pytest.raises(UndefinedError):
        _render("", source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{% if answer.optional %}yes{% else %}no{% endif %}", "no"),
        ("[{{ answer.optional }}]", "[]"),
        ("{{ answer['optional'] or '-' }}", "-"),
        ("{{ 'defined' if missing is defined else 'not passed' }}", "not passed"),
        ("{{ missing | default('fallback') }}", "fallback"),
    ],
)
def test_a_missing_key_of_a_passed_answer_is_still_falsy(source: str, expected: str) -> None:
    assert _render("", source, answer={}) == expected


def test_error_pages_render_with_the_names_they_read() -> None:
    html = _render("error.html", **BASE, status=502, code="service_unavailable", service="bell-receiver",
                   permission=None)  # fmt: skip
    assert "service_unavailable" in html and "bell-receiver" in html
