"""Pulsar tokens (JWTs): what our token layer adds to PyJWT, Pulsar's key forms and refusals."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path

import jwt
import pytest

from airflow_pulsar.broker.token_keys import (
    create_key_pair,
    create_secret_key,
    read_private_key,
    read_public_key,
    read_secret_key,
)
from airflow_pulsar.broker.tokens import TokenClaims, TokenError, create_token, verify_token

KEY = bytes(range(32))

# The well-known example token of the JWT debugger (jwt.io), made by another implementation.
JWT_IO_TOKEN = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


def _segment(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


@pytest.mark.filterwarnings("ignore:The HMAC key is 19 bytes long")  # the vector's key, not one a broker takes
def test_known_vector_verifies() -> None:
    assert verify_token(JWT_IO_TOKEN, b"your-256-bit-secret").subject == "1234567890"
    with pytest.raises(TokenError, match="signature does not match"):
        verify_token(JWT_IO_TOKEN, b"your-256-bit-secreT")


def test_token_is_byte_identical_to_pyjwt() -> None:
    # Pulsar's tokens carry the header {"alg":"HS256"} only; PyJWT makes that when told to drop "typ".
    expires = int(time.time()) + 3600
    ours = create_token(KEY, "admin", expires_at=expires)
    assert ours == jwt.encode({"sub": "admin", "exp": expires}, KEY, algorithm="HS256", headers={"typ": None})
    assert jwt.decode(ours, KEY, algorithms=["HS256"]) == {"sub": "admin", "exp": expires}
    assert create_token(KEY, "admin") == jwt.encode({"sub": "admin"}, KEY, algorithm="HS256", headers={"typ": None})


@pytest.mark.parametrize("algorithm", ["HS256", "HS384", "HS512"])
def test_pyjwt_tokens_verify(algorithm: str) -> None:
    key = bytes(range(64))  # as long as the largest hash, so PyJWT does not warn
    expires = time.time() + 60
    token = jwt.encode({"sub": "app", "exp": int(expires), "iat": int(time.time())}, key, algorithm=algorithm)
    claims = verify_token(token, key)
    assert claims.subject == "app" and claims.expires_at == int(expires)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (jwt.encode({"sub": "app", "exp": 1_000_000}, KEY, algorithm="HS256"), "token expired at 1970-01-12T13:46:40"),
        (jwt.encode({"sub": "app", "nbf": 4_000_000_000}, KEY, algorithm="HS256"), "not valid before 2096"),
        (jwt.encode({"sub": "app"}, b"another key of thirty-two bytes!", algorithm="HS256"), "does not match"),
        (jwt.encode({"role": "app"}, KEY, algorithm="HS256"), "no subject"),
        (jwt.encode({"sub": "app", "exp": "soon"}, KEY, algorithm="HS256"), r"Expiration Time claim \(exp\) must be"),
        (_segment({"alg": "none"}) + "." + _segment({"sub": "app"}) + ".", "three non-empty"),
        (_segment({"alg": "none"}) + "." + _segment({"sub": "app"}) + ".c2ln", "unsupported signing algorithm 'none'"),
        ("a.b", "three non-empty"),
        # PyJWT names the header; its wording of the fault differs between its releases.
        ("###." + _segment({"sub": "app"}) + ".c2ln", "malformed token: Invalid header "),
        (jwt.PyJWS().encode(b"not json", KEY, algorithm="HS256"), "malformed token: Invalid payload string"),
        (jwt.PyJWS().encode(b"[1]", KEY, algorithm="HS256"), "malformed token: Invalid payload string: must be a json object"),
        (jwt.encode({"sub": "app"}, KEY, algorithm="HS256")[:-4] + "AAAA", "signature does not match the secret key"),
    ],
)
def test_bad_tokens_are_refused_with_the_reason(token: str, reason: str) -> None:
    with pytest.raises(TokenError, match=reason):
        verify_token(token, KEY)


def test_tampered_claims_are_refused() -> None:
    header, _, signature = create_token(KEY, "reader").split(".")
    forged = f"{header}.{_segment({'sub': 'admin'})}.{signature}"
    with pytest.raises(TokenError, match="signature does not match"):
        verify_token(forged, KEY)


def test_expiry_is_checked_against_the_clock() -> None:
    expires = int(time.time()) + 2
    token = create_token(KEY, "app", expires_at=expires)
    assert verify_token(token, KEY).expires_at == expires
    time.sleep(expires - time.time() + 0.1)
    with pytest.raises(TokenError, match="token expired at .* \\(now "):
        verify_token(token, KEY)


def test_secret_key_sources(tmp_path: Path) -> None:
    key = create_secret_key()
    assert len(key) == 32 and key != create_secret_key()
    raw = tmp_path / "raw.key"
    raw.write_bytes(key)
    encoded = tmp_path / "b64.key"
    encoded.write_text("data:;base64," + base64.b64encode(key).decode() + "\n")
    assert read_secret_key(raw) == key
    assert read_secret_key(f"file://{raw}") == key
    assert read_secret_key(str(encoded)) == key
    assert read_secret_key("data:;base64," + base64.b64encode(key).decode()) == key


def test_bad_secret_keys_are_refused(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_bytes(b"secret")
    with pytest.raises(TokenError, match=r"short.key has 6 bytes; at least 32"):
        read_secret_key(short)
    with pytest.raises(TokenError, match="cannot read the secret key file .*missing.key"):
        read_secret_key(tmp_path / "missing.key")
    with pytest.raises(TokenError, match="not valid base64"):
        read_secret_key("data:;base64,@@@@")
    with pytest.raises(TokenError, match="must start with 'data:;base64,'"):
        read_secret_key("data:text/plain,secret")
    with pytest.raises(TokenError, match="has 6 bytes"):
        create_token(b"secret", "app")
    with pytest.raises(TokenError, match="non-empty subject"):
        create_token(KEY, "")


@pytest.mark.parametrize("algorithm", ["RS256", "RS512", "PS256", "ES256", "ES384", "ES512"])
def test_key_pair_tokens_verify_both_ways_with_pyjwt(algorithm: str, tmp_path: Path) -> None:
    private_der, public_der = create_key_pair(algorithm)
    (tmp_path / "private.key").write_bytes(private_der)
    (tmp_path / "public.key").write_bytes(public_der)
    private_key = read_private_key(tmp_path / "private.key")
    public_key = read_public_key(f"file://{tmp_path / 'public.key'}", algorithm)
    expires = int(time.time()) + 60
    theirs = jwt.encode({"sub": "app", "exp": expires, "aud": ["a", "b"]}, private_key, algorithm=algorithm)
    assert verify_token(theirs, public_key, audience_claim="aud", audience="b") == TokenClaims("app", expires)
    ours = create_token(private_key, "app", expires, algorithm)
    assert jwt.decode(ours, public_key, algorithms=[algorithm]) == {"sub": "app", "exp": expires}
    with pytest.raises(TokenError, match="do not include this broker's, 'c'"):
        verify_token(theirs, public_key, audience_claim="aud", audience="c")


def test_a_token_cannot_choose_hmac_against_a_public_key(tmp_path: Path) -> None:
    _, public_der = create_key_pair("RS256")
    (tmp_path / "public.pem").write_bytes(public_der)
    public_key = read_public_key(tmp_path / "public.pem")
    # The classic confusion: an HS256 token "signed" with the public key's bytes.
    signing_input = _segment({"alg": "HS256"}) + "." + _segment({"sub": "admin"})
    mac = hmac.new(public_der, signing_input.encode(), hashlib.sha256).digest()
    forged = signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    with pytest.raises(TokenError, match="signed with HS256, but the broker's key is an RSA key"):
        verify_token(forged, public_key)
    other_private, _ = create_key_pair("RS256")
    (tmp_path / "other.key").write_bytes(other_private)
    with pytest.raises(TokenError, match="signature does not match the public key"):
        verify_token(create_token(read_private_key(tmp_path / "other.key"), "admin"), public_key)


def test_role_claim_may_be_another_claim_or_a_list() -> None:
    token = jwt.encode({"sub": "client-id", "roles": ["reader", "writer"]}, KEY, algorithm="HS256")
    assert verify_token(token, KEY, role_claim="roles").subject == "reader"
    with pytest.raises(TokenError, match="no subject \\('role' claim\\)"):
        verify_token(token, KEY, role_claim="role")


def test_a_key_signs_only_its_own_family_and_curve(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="RS256 signs with an RSA key, not a secret key"):
        create_token(KEY, "app", algorithm_name="RS256")
    (tmp_path / "p384.key").write_bytes(create_key_pair("ES384")[0])
    p384 = read_private_key(tmp_path / "p384.key")
    assert jwt.get_unverified_header(create_token(p384, "app", algorithm_name="ES384"))["alg"] == "ES384"
    with pytest.raises(TokenError, match="the key cannot sign ES256"):
        create_token(p384, "app", algorithm_name="ES256")
    with pytest.raises(TokenError, match="unsupported signing algorithm 'HS1'"):
        create_token(KEY, "app", algorithm_name="HS1")
    (tmp_path / "p256.key").write_bytes(create_key_pair("ES256")[0])
    p256_token = create_token(read_private_key(tmp_path / "p256.key"), "app")
    with pytest.raises(TokenError, match="signed with ES256, which the broker's key cannot check"):
        verify_token(p256_token, p384.public_key())
