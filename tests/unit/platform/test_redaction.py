from __future__ import annotations

import base64
import io
import json
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from yovision_platform.observability._logging import (
    ARGS_FAILED_SUFFIX,
    FORMAT_FAILED_MSG,
    REDACTION_FAILED_MSG,
    JsonFormatter,
    RedactionFilter,
    configure_logging,
)
from yovision_platform.security import (
    REDACTED,
    SecretRegistry,
    is_sensitive_field_name,
    redact_exception,
    redact_text,
    redact_value,
    register_secret,
)
from yovision_platform.security import _redaction as redaction

DB_PASSWORD = "Sup3r-S3cret!"
HMAC_KEY = bytes(range(64, 96))
SIGNATURE_HEX = "9f" * 32

SECRET_TEXTS = [
    (f"postgresql://sense_rt:{DB_PASSWORD}@127.0.0.1:55432/yovision", DB_PASSWORD),
    (f"postgres://u:{DB_PASSWORD}@db/yovision?sslmode=require", DB_PASSWORD),
    ("rtsp://admin:cam-pass-123@10.0.0.7:554/stream1", "cam-pass-123"),
    ("rtsp://admin:with/slash@cam/stream", "with/slash"),
    ("rtsp://admin:p@ss@cam/stream", "p@ss"),
    ("https://bell:https-pass-42@bell.example/internal", "https-pass-42"),
    ("http://only-user-token-xyz@bell.local/", "only-user-token-xyz"),
    ("host=127.0.0.1 dbname=yovision user=sense password=libpq-pw-77 sslmode=disable", "libpq-pw-77"),
    ("host=h password='quoted pw 88' dbname=x", "quoted pw 88"),
    ("db_password=underscored-pw-99 next", "underscored-pw-99"),
    ('{"password": "json-pw-11", "ok": true}', "json-pw-11"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
    ("calling with bearer abc.def-ghi_jkl", "abc.def-ghi_jkl"),
    ("Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("{'authorization': 'Token tok-12345', 'x': 1}", "tok-12345"),
    (f"X-Yovision-Signature: v1={SIGNATURE_HEX}", SIGNATURE_HEX),
    (f"[('x-yovision-signature', 'v1={SIGNATURE_HEX}')]", SIGNATURE_HEX),
    ("Cookie: session=cookie-value-3", "cookie-value-3"),
    ("token=query-token-5&next=1", "query-token-5"),
]


@pytest.fixture
def registry() -> SecretRegistry:
    return SecretRegistry()


@pytest.mark.parametrize(("text", "secret"), SECRET_TEXTS)
def test_every_secret_shape_is_redacted_in_text(text: str, secret: str, registry: SecretRegistry) -> None:
    redacted = redact_text(text, registry)
    assert secret not in redacted
    assert REDACTED in redacted


def test_uri_credentials_keep_scheme_and_host() -> None:
    assert redact_text("rtsp://a:b@cam.local:554/s1", SecretRegistry()) == "rtsp://***@cam.local:554/s1"
    assert redact_text("see http://example.com/a?b=c", SecretRegistry()) == "see http://example.com/a?b=c"


def test_plain_text_is_left_alone(registry: SecretRegistry) -> None:
    text = "relay delivered 100 rows to bell in 0.2 s; key_id=bell-a digest=" + "ab" * 32
    assert redact_text(text, registry) == text


def test_registered_secret_is_redacted_wherever_it_appears(registry: SecretRegistry) -> None:
    registry.register("k3y-material-in-plain-sight")
    assert redact_text("x=k3y-material-in-plain-sight;y", registry) == f"x={REDACTED};y"


def test_registered_key_bytes_are_redacted_as_hex_and_base64(registry: SecretRegistry) -> None:
    registry.register(HMAC_KEY)
    for form in (
        HMAC_KEY.hex(),
        HMAC_KEY.hex().upper(),
        base64.b64encode(HMAC_KEY).decode(),
        base64.urlsafe_b64encode(HMAC_KEY).decode().rstrip("="),
    ):
        assert form not in redact_text(f"loaded key {form} ok", registry)


def test_registered_dsn_also_registers_its_password(registry: SecretRegistry) -> None:
    registry.register("postgresql://u:pw%2Fencoded-9@h/db")
    assert "pw/encoded-9" not in redact_text("password was pw/encoded-9", registry)


def test_module_level_register_secret_feeds_the_default_registry() -> None:
    secret = secrets.token_hex(20)
    register_secret(secret)
    assert secret not in redact_text(f"value {secret}")
    assert secret not in redaction.default_registry.redact(secret)


@pytest.mark.parametrize(
    "name",
    ["key", "hmac_key", "aesKey", "signing-key", "secret", "client_secret", "token", "fencing_token",
     "password", "db_password", "Authorization", "cookie", "dsn", "database_dsn", "source_uri", "sourceUri",
     "api_key", "x_yovision_signature"],
)  # fmt: skip
def test_sensitive_field_names_are_recognised(name: str) -> None:
    assert is_sensitive_field_name(name)


@pytest.mark.parametrize("name", ["key_id", "partition_key", "idempotency_key", "device_id", "path", "msg"])
def test_ordinary_field_names_are_not_sensitive(name: str) -> None:
    assert not is_sensitive_field_name(name)


def test_structured_values_redact_sensitive_fields_nested_sequences_and_bytes(
    registry: SecretRegistry,
) -> None:
    value = {
        "hmac_key": "abc",
        "key_id": "bell-a",
        "nested": {"source_uri": "rtsp://cam/1", "urls": [f"postgresql://u:{DB_PASSWORD}@h/d"]},
        "body": b"raw body bytes",
        "count": 3,
    }
    assert redact_value(value, registry) == {
        "hmac_key": REDACTED,
        "key_id": "bell-a",
        "nested": {"source_uri": REDACTED, "urls": ["postgresql://***@h/d"]},
        "body": "<bytes len=14>",
        "count": 3,
    }


def test_exception_text_and_traceback_are_redacted(registry: SecretRegistry) -> None:
    try:
        try:
            raise ConnectionError(f"cannot reach postgresql://u:{DB_PASSWORD}@h/db")
        except ConnectionError as inner:
            raise RuntimeError("password=chained-secret-1 failed") from inner
    except RuntimeError as exc:
        rendered = redact_exception(exc, registry)
    assert DB_PASSWORD not in rendered
    assert "chained-secret-1" not in rendered
    assert "Traceback" in rendered
    assert "ConnectionError" in rendered


class JsonLines:
    def __init__(self, stream: io.StringIO) -> None:
        self._stream = stream

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self._stream.getvalue().splitlines()]


@pytest.fixture
def logged(registry: SecretRegistry) -> Iterator[JsonLines]:
    stream = io.StringIO()
    handler = configure_logging("bell-receiver", "host-1a2b3c", "debug", stream=stream, registry=registry)
    try:
        yield JsonLines(stream)
    finally:
        logging.getLogger().removeHandler(handler)


def test_log_lines_are_json_objects_with_the_standard_fields(logged: JsonLines) -> None:
    logging.getLogger("yovision.test").info("relay started", extra={"batch_size": 100})
    (record,) = logged.records()
    assert record["msg"] == "relay started"
    assert record["level"] == "INFO"
    assert record["logger"] == "yovision.test"
    assert record["service"] == "bell-receiver"
    assert record["instance_id"] == "host-1a2b3c"
    assert record["ts"].endswith("Z")
    assert record["extra"] == {"batch_size": 100}


@pytest.mark.parametrize(("text", "secret"), SECRET_TEXTS)
def test_secrets_are_redacted_in_message_args_and_extra(logged: JsonLines, text: str, secret: str) -> None:
    log = logging.getLogger("yovision.test")
    log.warning(text)
    log.warning("connecting to %s", text)
    log.warning("connect", extra={"target": text, "details": {"inner": [text]}})
    line = json.dumps(logged.records())
    assert secret not in line
    assert secret.replace("/", "\\/") not in line


def test_sensitive_extra_fields_are_replaced_whole(logged: JsonLines) -> None:
    logging.getLogger("yovision.test").info(
        "loaded", extra={"hmac_key": HMAC_KEY.hex(), "dsn": "anything", "key_id": "bell-a"}
    )
    (record,) = logged.records()
    assert record["extra"] == {"hmac_key": REDACTED, "dsn": REDACTED, "key_id": "bell-a"}


def test_registered_secrets_are_redacted_in_log_lines(logged: JsonLines, registry: SecretRegistry) -> None:
    registry.register(HMAC_KEY)
    logging.getLogger("yovision.test").error("key %s", base64.b64encode(HMAC_KEY).decode())
    assert base64.b64encode(HMAC_KEY).decode() not in json.dumps(logged.records())


def test_exception_tracebacks_are_redacted_in_log_lines(logged: JsonLines) -> None:
    try:
        raise ValueError(f"bad dsn postgresql://u:{DB_PASSWORD}@h/db")
    except ValueError:
        logging.getLogger("yovision.test").exception("startup failed")
    (record,) = logged.records()
    assert DB_PASSWORD not in json.dumps(record)
    assert "ValueError" in record["exc"]


def test_mismatched_log_args_still_produce_a_line(logged: JsonLines) -> None:
    logging.getLogger("yovision.test").info("two args %s %s", f"password={DB_PASSWORD}")
    (record,) = logged.records()
    assert DB_PASSWORD not in json.dumps(record)
    assert record["msg"].startswith("two args")


class Exploding:
    def __str__(self) -> str:
        raise RuntimeError("cannot render")


def log_through_filter_and_formatter(registry: SecretRegistry, *args: Any, **kwargs: Any) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactionFilter(registry))
    handler.setFormatter(JsonFormatter("bell-receiver", "host-1", registry))
    log = logging.getLogger("yovision.test.isolated")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.error(*args, **kwargs)
    finally:
        log.removeHandler(handler)
        log.propagate = True
    (line,) = stream.getvalue().splitlines()
    return line


def test_unrenderable_log_args_keep_the_template_and_drop_the_args(registry: SecretRegistry) -> None:
    line = log_through_filter_and_formatter(registry, "value %s %s", Exploding(), DB_PASSWORD)
    assert json.loads(line)["msg"] == "value %s %s" + ARGS_FAILED_SUFFIX
    assert DB_PASSWORD not in line


def test_a_failing_redaction_never_drops_the_line(registry: SecretRegistry) -> None:
    line = log_through_filter_and_formatter(
        registry, f"password={DB_PASSWORD}", extra={"payload": Exploding(), "other": DB_PASSWORD}
    )
    record = json.loads(line)
    assert record["msg"] == REDACTION_FAILED_MSG
    assert record["redaction_failed"] is True
    assert DB_PASSWORD not in line


def test_a_failing_formatter_falls_back_to_a_safe_line(registry: SecretRegistry) -> None:
    formatter = JsonFormatter("bell-receiver", "host-1", registry)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "msg", None, None)
    record.payload = Exploding()
    assert json.loads(formatter.format(record))["msg"] == FORMAT_FAILED_MSG


def test_configure_logging_refuses_unknown_levels() -> None:
    with pytest.raises(ValueError, match="log level"):
        configure_logging("bell-receiver", "host-1", "chatty")
