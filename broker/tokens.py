"""Pulsar's authentication tokens: JSON Web Tokens, signed with a shared secret key or a key pair.

Signing and checking is PyJWT's; this module holds what Pulsar adds on top. The header names the
algorithm: HS256/384/512 (HMAC under a secret key, Pulsar's ``tokenSecretKey``), RS256/384/512 and
PS256/384/512 (RSA), ES256/384/512 (ECDSA) under a private key, checked with its public key
(Pulsar's ``tokenPublicKey``; what OAuth2 issuers sign access tokens with). The key decides the
family of algorithms a token may use, so a token cannot pick HMAC to be "verified" with a public
key. The claims are the role (``sub`` unless told otherwise), and optionally ``exp`` and ``nbf``,
seconds since the epoch. Tokens made here carry the header ``{"alg": ...}`` alone, as Pulsar's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
# A secret key (bytes) verifies and signs; a public key verifies, a private key signs.
VerificationKey = bytes | PublicKey
SigningKey = bytes | PrivateKey

DEFAULT_ALGORITHM = "HS256"
# Pulsar's key library refuses HMAC keys shorter than the hash (256 bits for HS256).
MIN_SECRET_KEY_BYTES = 32

# Algorithm name -> the key family that signs and checks it.
ALGORITHM_FAMILIES = {
    **{f"HS{bits}": "HMAC" for bits in (256, 384, 512)},
    **{f"{prefix}{bits}": "RSA" for prefix in ("RS", "PS") for bits in (256, 384, 512)},
    **{f"ES{bits}": "EC" for bits in (256, 384, 512)},
}
# The algorithm a key signs with when none is named (Pulsar's defaults per key type).
_DEFAULT_FOR_FAMILY = {"HMAC": DEFAULT_ALGORITHM, "RSA": "RS256", "EC": "ES256"}
_KEY_KINDS = {"HMAC": "a secret key", "RSA": "an RSA key", "EC": "an EC key"}
# Pulsar checks the signature, exp and nbf; the audience is checked below, under any claim name.
_DECODE_OPTIONS: Any = {"verify_aud": False, "verify_iat": False}


class TokenError(ValueError):
    """A token or key that cannot be used; the message says what is wrong with it."""


@dataclass(frozen=True)
class TokenClaims:
    """What a verified token says: its subject (role) and when it expires (None: never)."""

    subject: str
    expires_at: float | None = None


def algorithm_family(name: Any) -> str:
    """The key family (``HMAC``, ``RSA``, ``EC``) of algorithm ``name``; TokenError for any other
    algorithm (``none`` included)."""
    family = ALGORITHM_FAMILIES.get(name) if isinstance(name, str) else None
    if family is None:
        raise TokenError(f"unsupported signing algorithm {name!r} (expected one of {', '.join(ALGORITHM_FAMILIES)})")
    return family


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
    name = algorithm_name or _DEFAULT_FOR_FAMILY[key_family(key)]
    if algorithm_family(name) != key_family(key):
        raise TokenError(f"{name} signs with {_KEY_KINDS[algorithm_family(name)]}, not {_KEY_KINDS[key_family(key)]}")
    if isinstance(key, bytes):
        check_secret_key(key, "the secret key")
    claims: dict[str, Any] = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    try:
        return jwt.encode(claims, key, algorithm=name, headers={"typ": None})
    except jwt.InvalidKeyError as exc:  # e.g. an EC key on another curve than the algorithm's
        raise TokenError(f"the key cannot sign {name}: {exc}") from None


def verify_token(
    token: str,
    key: VerificationKey,
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
    try:
        header_alg = jwt.get_unverified_header(token).get("alg")
    except jwt.DecodeError as exc:
        raise TokenError(f"malformed token: {exc}") from None
    family = algorithm_family(header_alg)  # refuses any algorithm but the HS, RS, PS and ES ones
    name = str(header_alg)
    if family != key_family(key):
        raise TokenError(f"the token is signed with {name}, but the broker's key is {_KEY_KINDS[key_family(key)]}")
    try:
        claims = jwt.decode(token, key, algorithms=[name], options=_DECODE_OPTIONS)
    except jwt.InvalidSignatureError:
        raise TokenError("signature does not match the " + ("secret key" if isinstance(key, bytes) else "public key")) from None
    except jwt.ExpiredSignatureError:
        raise TokenError(f"token expired at {_iso(_unverified_claims(token)['exp'])} (now {_iso(None)})") from None
    except jwt.ImmatureSignatureError:
        raise TokenError(f"token not valid before {_iso(_unverified_claims(token)['nbf'])} (now {_iso(None)})") from None
    except jwt.InvalidKeyError as exc:  # e.g. an ES256 token against a key on another curve
        raise TokenError(f"the token is signed with {name}, which the broker's key cannot check: {exc}") from None
    except jwt.InvalidTokenError as exc:
        raise TokenError(f"malformed token: {exc}") from None
    if audience_claim is not None:
        _check_audience(claims.get(audience_claim), audience_claim, audience)
    role = claims.get(role_claim)
    if isinstance(role, list) and role:
        role = role[0]
    if not isinstance(role, str) or not role:
        raise TokenError(f"token has no subject ({role_claim!r} claim)")
    expires_at = claims.get("exp")
    return TokenClaims(role, None if expires_at is None else float(expires_at))


def _unverified_claims(token: str) -> dict[str, Any]:
    """The claims of a token whose signature PyJWT has checked already (it checks it before the times)."""
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims


def _check_audience(value: Any, claim: str, audience: str | None) -> None:
    if value is None:
        raise TokenError(f"token has no {claim!r} claim (the audience)")
    audiences = value if isinstance(value, list) else [value]
    if audience not in audiences:
        raise TokenError(f"the token's audiences {audiences} do not include this broker's, {audience!r}")


def _iso(seconds: float | None) -> str:
    """A time as ISO 8601 UTC, to the second; None: now."""
    moment = datetime.now(timezone.utc) if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)
    return moment.isoformat(timespec="seconds")
