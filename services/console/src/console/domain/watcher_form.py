"""The watcher form: from posted fields to the signal-watcher API body, the API's error codes back to the
field they belong to (so the page shows each error beside its field), and what each stable code of a
refused or failed test means (the form's "Test" shows the code and its meaning)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FIELDS = (
    "name",
    "agent_id",
    "url",
    "method",
    "interval_minutes",
    "compare_mode",
    "json_path",
    "prompt_template",
)
HEADER_ROWS = 3
MASK = "******"  # how signal-watcher shows a sensitive header value; sent back, it keeps the stored one
# signal-watcher's domain codes (ValidationFailed) by prefix -> the form field they concern
_CODE_FIELDS = (
    ("url", "url"),
    ("ssrf", "url"),
    ("header", "headers"),
    ("body", "body"),
    ("interval", "interval_minutes"),
    ("json_path", "json_path"),
    ("prompt", "prompt_template"),
    ("name", "name"),
    ("agent", "agent_id"),
    ("method", "method"),
    ("compare", "compare_mode"),
    ("probe_network", "url"),
    ("forbidden_header", "headers"),
    ("too_many_headers", "headers"),
)
# What signal-watcher's stable codes mean (docs/services/signal-watcher.md): a test's probe failures and the
# refusals of a definition. Fixed texts, never the answer's content.
CODE_MEANINGS = {
    "timeout": "The target did not answer in time (10 s to connect, 15 s per read, 60 s in all).",
    "too_large": "The response body is larger than 1 MiB.",
    "redirect": "The target answered with a redirect (3xx); redirects are not followed: use the final URL.",
    "connect_refused": "Nothing accepts connections at that address and port.",
    "connect_failed": "No connection could be made to the target.",
    "dns": "The host name does not resolve.",
    "ssrf_blocked": "The host resolves to an address probes may not reach (private, loopback, ...).",
    "probe_network_confined": "This deployment confines probes to listed networks; the address is outside.",
    "url_refused": "The URL breaks a rule of the probe URLs.",
    "tls": "The TLS handshake or the certificate check failed.",
    "protocol_error": "The target's answer is not valid HTTP.",
    "json_parse_error": "The response body is not JSON.",
    "json_path_missing": "The JSON has no value at this path.",
    "json_value_null": "The value at this path is null.",
    "probe_internal_error": "The probe failed unexpectedly (logged by signal-watcher).",
    "judge_internal_error": "Judging the response failed unexpectedly (logged by signal-watcher).",
    "url_invalid": "Not a valid URL.",
    "url_scheme_not_allowed": "Only http and https URLs can be probed.",
    "url_credentials_not_allowed": "No user name or password in the URL: send credentials as a header.",
    "url_port_invalid": "The port must be 1 to 65535.",
    "ssrf_ipv6_literal": "IPv6 addresses cannot be probed: use a host name.",
    "ssrf_ambiguous_ip": "Write an IPv4 address as four decimal numbers (e.g. 93.184.216.34).",
    "ssrf_blocked_name": "This host name is local or internal and cannot be probed.",
    "ssrf_blocked_address": "This address is private, loopback or reserved and cannot be probed.",
    "too_many_headers": "At most 20 headers.",
    "invalid_header_key": "A header name must be printable ASCII, without ':' or surrounding spaces.",
    "invalid_header_value": "A header value must not contain line breaks.",
    "forbidden_header": "Host, Content-Length and Transfer-Encoding cannot be set.",
    "invalid_json_path": "Write the path dotted (data.items.0.price) or as $-rooted JSONPath with dot names "
    "and bracketed indexes ($.data.items[0].price); no .., *, filters, slices or quoted names.",
    "json_path_requires_json_field": "A JSON path is only used with the JSON_FIELD comparison.",
    "body_requires_post": "Only a POST sends a body.",
    "body_too_large": "The body is larger than 64 KiB.",
    "stored_body_requires_post": "The stored body needs POST: choose POST, or save with an empty body.",
    "invalid_name": "The name must not be blank (at most 128 characters).",
    "invalid_agent_id": "The agent id must not be blank (at most 128 characters).",
    "invalid_prompt_template": "The prompt template must not be blank (at most 2000 characters).",
    "invalid_request": "A field is missing or of the wrong type.",
}
UNKNOWN_CODE_MEANING = "See the signal-watcher documentation for this code."


def body_of(form: Mapping[str, Any], header_pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    body: dict[str, Any] = {k: str(form.get(k, "")).strip() for k in FIELDS}
    interval = body["interval_minutes"]
    body["interval_minutes"] = int(interval) if interval.isdigit() else interval or 15
    body["json_path"] = body["json_path"] or None
    body["headers"] = [{"key": k, "value": v} for k, v in header_pairs if k]
    posted_body = str(form.get("body", ""))
    if posted_body:
        body["body"] = posted_body
    return body


def field_of(code: str, fields: Sequence[str]) -> dict[str, str]:
    """Which field an API error belongs to: validation `fields` first, else the code's prefix."""
    if fields:
        return {f.split(".")[0]: code for f in fields}
    named = code.removeprefix("invalid_")  # invalid_name, invalid_json_path, invalid_header_key, ...
    for prefix, field in _CODE_FIELDS:
        if named.startswith(prefix):
            return {field: code}
    return {"form": code}


def meaning_of(code: str) -> str:
    """What a signal-watcher code means, in a fixed sentence (an unknown code gets a pointer to the docs)."""
    return CODE_MEANINGS.get(code, UNKNOWN_CODE_MEANING)


@dataclass(frozen=True)
class FormPreview:
    """The outcome of the form's "Test": signal-watcher's test result (`TestResultOut`), or the code of the
    definition it refused. `retype`: the form was rendered again without the header values and the body the
    user typed (secrets are never rendered back), so they must be typed again before saving."""

    result: Mapping[str, Any] | None = None
    refused: str | None = None
    retype: bool = False

    @property
    def code(self) -> str | None:
        return self.refused or (self.result or {}).get("error_code")

    @property
    def meaning(self) -> str | None:
        return meaning_of(self.code) if self.code else None


def headers_again(body: Mapping[str, Any]) -> list[dict[str, str]]:
    """The header rows of a form rendered again: the keys as posted, a value only when it is the mask (the
    stored value stays), never a value the user typed."""
    return [{"key": h["key"], "value": MASK if h["value"] == MASK else ""} for h in body["headers"]]


def typed_secrets(body: Mapping[str, Any]) -> bool:
    """Whether the posted form held a header value or a body that rendering it again drops."""
    return "body" in body or any(h["value"] not in ("", MASK) for h in body["headers"])
