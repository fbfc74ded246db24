from __future__ import annotations

import secrets
import time
from pathlib import Path

import jwt
import pytest

from yovision_platform.auth import AuthError, Forbidden, StaticBearerToken, TokenVerifier
from yovision_platform.errors import ConfigError

KEY = secrets.token_bytes(32)


def verifier() -> TokenVerifier:
    return TokenVerifier(KEY, issuer="yovision-dev", audience="signal-watcher")


def test_a_minted_token_verifies_to_its_subject_and_permissions() -> None:
    identity = verifier().verify(verifier().mint("alice", ["signal:read"]))
    assert identity.subject == "alice" and identity.permissions == frozenset({"signal:read"})
    identity.require("signal:read")
    with pytest.raises(Forbidden):
        identity.require("signal:write")


@pytest.mark.parametrize(
    "claims_change",
    [
        {"aud": "media-worker"},
        {"iss": "someone-else"},
        {"exp": int(time.time()) - 120},
        {"sub": "bad subject with spaces"},
        {"perm": ["NOT-A-PERMISSION"]},
        {"exp": int(time.time()) + 2 * 24 * 3600},
    ],
)
def test_tokens_with_wrong_claims_are_refused_uniformly(claims_change: dict[str, object]) -> None:
    now = int(time.time())
    claims = {
        "sub": "alice",
        "iss": "yovision-dev",
        "aud": "signal-watcher",
        "iat": now,
        "exp": now + 60,
        "perm": [],
        **claims_change,
    }
    with pytest.raises(AuthError) as caught:
        verifier().verify(jwt.encode(claims, KEY, algorithm="HS256"))
    assert str(caught.value) == "unauthorized"


def test_unsigned_and_foreign_key_tokens_are_refused() -> None:
    now = int(time.time())
    claims = {"sub": "alice", "iss": "yovision-dev", "aud": "signal-watcher", "iat": now, "exp": now + 60}
    with pytest.raises(AuthError):
        verifier().verify(jwt.encode(claims, None, algorithm="none"))
    with pytest.raises(AuthError):
        verifier().verify(jwt.encode(claims, secrets.token_bytes(32), algorithm="HS256"))
    with pytest.raises(AuthError):
        verifier().verify(verifier().mint("alice")[:-2] + "xx")


@pytest.mark.parametrize(("length", "accepted"), [(31, False), (32, True)])
def test_jwt_key_length_boundary(length: int, accepted: bool) -> None:
    if accepted:
        TokenVerifier(secrets.token_bytes(length), issuer="i", audience="a")
    else:
        with pytest.raises(ValueError, match="32"):
            TokenVerifier(secrets.token_bytes(length), issuer="i", audience="a")


def test_key_file_errors_name_the_setting(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_text(secrets.token_hex(31))
    short.chmod(0o600)
    with pytest.raises(ConfigError) as caught:
        TokenVerifier.from_key_file(short, "SIGNAL_AUTH_JWT_KEY_FILE", issuer="i", audience="a")
    assert "SIGNAL_AUTH_JWT_KEY_FILE" in str(caught.value)


@pytest.mark.parametrize(("length", "accepted"), [(31, False), (32, True), (33, True)])
def test_static_token_length_boundary(length: int, accepted: bool) -> None:
    token = "t" * length
    if accepted:
        StaticBearerToken(token).verify(token)
    else:
        with pytest.raises(ValueError, match="32"):
            StaticBearerToken(token)


def test_a_wrong_static_token_is_refused() -> None:
    with pytest.raises(AuthError):
        StaticBearerToken("s" * 40).verify("s" * 39 + "x")


EXPIRES = 1_800_000_000


def token_expiring_at(verifier_: TokenVerifier, expires: int) -> str:
    return verifier_.mint("alice", ttl_seconds=600, now=expires - 600)


@pytest.mark.parametrize(
    ("offset", "accepted"),
    [(-1, True), (0, True), (4, True), (5, False), (6, False), (30, False)],
)
def test_an_expired_token_is_accepted_only_within_the_default_5_s_leeway(offset: int, accepted: bool) -> None:
    check = verifier()
    token = token_expiring_at(check, EXPIRES)
    if accepted:
        assert check.verify(token, now=EXPIRES + offset).subject == "alice"
    else:
        with pytest.raises(AuthError):
            check.verify(token, now=EXPIRES + offset)


@pytest.mark.parametrize(
    ("leeway", "offset", "accepted"), [(0, -1, True), (0, 0, False), (60, 59, True), (60, 60, False)]
)
def test_the_leeway_is_configurable(leeway: int, offset: int, accepted: bool) -> None:
    check = TokenVerifier(KEY, issuer="yovision-dev", audience="signal-watcher", leeway_seconds=leeway)
    token = token_expiring_at(check, EXPIRES)
    if accepted:
        check.verify(token, now=EXPIRES + offset)
    else:
        with pytest.raises(AuthError):
            check.verify(token, now=EXPIRES + offset)


@pytest.mark.parametrize("leeway", [-1, 61])
def test_a_leeway_outside_0_to_60_is_refused(leeway: int) -> None:
    with pytest.raises(ValueError, match="leeway_seconds"):
        TokenVerifier(KEY, issuer="i", audience="a", leeway_seconds=leeway)


@pytest.mark.parametrize(("issued_ahead", "accepted"), [(5, True), (6, False)])
def test_a_token_issued_in_the_future_is_refused_beyond_the_leeway(issued_ahead: int, accepted: bool) -> None:
    check = verifier()
    token = check.mint("alice", ttl_seconds=600, now=EXPIRES + issued_ahead)
    if accepted:
        check.verify(token, now=EXPIRES)
    else:
        with pytest.raises(AuthError):
            check.verify(token, now=EXPIRES)
