"""Pulsar's authentication tokens: JSON Web Tokens, signed with a shared secret key or a key pair.

A token is ``base64url(header).base64url(claims).base64url(signature)``, the header naming the
algorithm: HS256/384/512 (HMAC under a secret key, what ``pulsar tokens create --secret-key``
makes), RS256/384/512 and PS256/384/512 (RSA), ES256/384/512 (ECDSA) under a private key, checked
with its public key (Pulsar's ``tokenPublicKey``; what OAuth2 issuers sign access tokens with).
One verification path serves them all: the key decides the family of algorithms a token may use,
so a token cannot pick HMAC to be "verified" with a public key. The claims are the role (``sub``
unless told otherwise), and optionally ``exp`` and ``nbf``, seconds since the epoch.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
# A secret key (bytes) verifies and signs; a public key verifies, a private key signs.
VerificationKey = bytes | PublicKey
SigningKey = bytes | PrivateKey

DEFAULT_ALGORITHM = "HS256"
# Pulsar's key library refuses HMAC keys shorter than the hash (256 bits for HS256).
MIN_SECRET_KEY_BYTES = 32


@dataclass(frozen=True)
class Algorithm:
    """A JWS algorithm: the key family it needs (``HMAC``, ``RSA``, ``EC``) and its hash."""

    family: str
    hash: hashes.HashAlgorithm
    pss: bool = False


_HASHES = {256: hashes.SHA256(), 384: hashes.SHA384(), 512: hashes.SHA512()}
ALGORITHMS = {
    **{f"HS{bits}": Algorithm("HMAC", digest) for bits, digest in _HASHES.items()},
    **{f"RS{bits}": Algorithm("RSA", digest) for bits, digest in _HASHES.items()},
    **{f"PS{bits}": Algorithm("RSA", digest, pss=True) for bits, digest in _HASHES.items()},
    **{f"ES{bits}": Algorithm("EC", digest) for bits, digest in _HASHES.items()},
}


class TokenError(ValueError):
    """A token or key that cannot be used; the message says what is wrong with it."""


@dataclass(frozen=True)
class TokenClaims:
    """What a verified token says: its subject (role) and when it expires (None: never)."""

    subject: str
    expires_at: float | None = None


def algorithm(name: Any) -> Algorithm:
    """The algorithm called ``name``; TokenError for any other (``none`` included)."""
    found = ALGORITHMS.get(name) if isinstance(name, str) else None
    if found is None:
        raise TokenError(f"unsupported signing algorithm {name!r} (expected one of {', '.join(ALGORITHMS)})")
    return found


def key_family(key: VerificationKey | SigningKey) -> str:
    """``HMAC`` for a secret key, ``RSA`` or ``EC`` for the halves of a key pair."""
    if isinstance(key, bytes):
        return "HMAC"
    return "RSA" if isinstance(key, (rsa.RSAPublicKey, rsa.RSAPrivateKey)) else "EC"


def check_secret_key(key: bytes, where: str) -> bytes:
    """``key`` if it is long enough for HS256; TokenError saying where it came from otherwise."""
    if len(key) < MIN_SECRET_KEY_BYTES:
        raise TokenError(
            f"the secret key in {where} has {len(key)} bytes; at least {MIN_SECRET_KEY_BYTES} (256 bits) are needed"
        )
    return key


def create_token(
    key: SigningKey, subject: str, expires_at: float | None = None, algorithm_name: str | None = None
) -> str:
    """A signed token for ``subject``, valid until ``expires_at`` (epoch seconds) or for ever.

    The algorithm defaults to HS256 for a secret key, RS256 for an RSA key, ES256 for an EC key.
    """
    if not subject:
        raise TokenError("a token needs a non-empty subject")
    name = algorithm_name or {"HMAC": DEFAULT_ALGORITHM, "RSA": "RS256", "EC": "ES256"}[key_family(key)]
    claims: dict[str, Any] = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    signing_input = _encode_json({"alg": name}) + "." + _encode_json(claims)
    return signing_input + "." + _b64encode(_sign(algorithm(name), key, signing_input.encode("ascii")))


def verify_token(
    token: str,
    key: VerificationKey,
    now: float | None = None,
    *,
    role_claim: str = "sub",
    audience_claim: str | None = None,
    audience: str | None = None,
) -> TokenClaims:
    """Check the token's signature, expiry and role (and audience, if asked); raises TokenError
    saying why it is refused. The role is the ``role_claim`` (a string, or a list's first one)."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise TokenError("not a signed JWT (expected three non-empty dot-separated parts)")
    header = _decode_json(parts[0], "header")
    signing = algorithm(header.get("alg"))
    claims = _decode_json(parts[1], "claims")  # decoding first also proves both parts are ASCII
    if signing.family != key_family(key):
        raise TokenError(
            f"the token is signed with {header['alg']}, but the broker's key is {_describe_family(key_family(key))}"
        )
    if not _signature_matches(signing, key, f"{parts[0]}.{parts[1]}".encode("ascii"), _b64decode(parts[2], "signature")):
        raise TokenError("signature does not match the " + ("secret key" if isinstance(key, bytes) else "public key"))
    now = time.time() if now is None else now
    expires_at = _time_claim(claims, "exp")
    if expires_at is not None and now >= expires_at:
        raise TokenError(f"token expired at {_iso(expires_at)} (now {_iso(now)})")
    not_before = _time_claim(claims, "nbf")
    if not_before is not None and now < not_before:
        raise TokenError(f"token not valid before {_iso(not_before)} (now {_iso(now)})")
    if audience_claim is not None:
        _check_audience(claims.get(audience_claim), audience_claim, audience)
    role = claims.get(role_claim)
    if isinstance(role, list) and role:
        role = role[0]
    if not isinstance(role, str) or not role:
        raise TokenError(f"token has no subject ({role_claim!r} claim)")
    return TokenClaims(role, expires_at)


def _describe_family(family: str) -> str:
    return {"HMAC": "a secret key (HS256, HS384, HS512)", "RSA": "an RSA public key", "EC": "an EC public key"}[family]


def _check_audience(value: Any, claim: str, audience: str | None) -> None:
    if value is None:
        raise TokenError(f"token has no {claim!r} claim (the audience)")
    audiences = value if isinstance(value, list) else [value]
    if audience not in audiences:
        raise TokenError(f"the token's audiences {audiences} do not include this broker's, {audience!r}")


def _sign(signing: Algorithm, key: SigningKey, data: bytes) -> bytes:
    if signing.family != key_family(key):
        raise TokenError(f"a {key_family(key)} key cannot sign with {signing.family} algorithm")
    if isinstance(key, bytes):
        return hmac.new(check_secret_key(key, "the secret key"), data, signing.hash.name).digest()
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(data, _rsa_padding(signing), signing.hash)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(signing.hash)))
    size = (key.curve.key_size + 7) // 8
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")  # JWS wants r and s side by side, not DER


def _signature_matches(signing: Algorithm, key: VerificationKey, data: bytes, signature: bytes) -> bool:
    if isinstance(key, bytes):
        return hmac.compare_digest(hmac.new(key, data, signing.hash.name).digest(), signature)
    try:
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, data, _rsa_padding(signing), signing.hash)
        else:
            assert isinstance(key, ec.EllipticCurvePublicKey)
            size = (key.curve.key_size + 7) // 8
            if len(signature) != 2 * size:
                return False
            r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
            key.verify(encode_dss_signature(r, s), data, ec.ECDSA(signing.hash))
    except InvalidSignature:
        return False
    return True


def _rsa_padding(signing: Algorithm) -> padding.AsymmetricPadding:
    if signing.pss:
        return padding.PSS(mgf=padding.MGF1(signing.hash), salt_length=signing.hash.digest_size)
    return padding.PKCS1v15()


def _time_claim(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenError(f"token claim {name!r} must be a number of seconds since the epoch, got {value!r}")
    return float(value)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str, part: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise TokenError(f"the token's {part} is not base64url") from None


def _encode_json(value: dict[str, Any]) -> str:
    return _b64encode(json.dumps(value, separators=(",", ":")).encode())


def _decode_json(text: str, part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64decode(text, part))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise TokenError(f"the token's {part} is not JSON") from None
    if not isinstance(value, dict):
        raise TokenError(f"the token's {part} is not a JSON object")
    return value
