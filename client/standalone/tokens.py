"""Pulsar's authentication tokens: JSON Web Tokens signed with a shared secret key.

A token is ``base64url(header).base64url(claims).base64url(HMAC)``, the header naming the HMAC
algorithm (HS256 as Pulsar's ``tokens create`` makes them; HS384 and HS512 verify too). The
claims are ``sub``, the role the token stands for, and optionally ``exp``, seconds since the epoch
after which the token is refused. The secret key is read as Pulsar reads ``tokenSecretKey``: raw
bytes from a file, or a ``data:;base64,...`` value (inline, or as a file's whole content).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

_DIGESTS: dict[str, Callable[..., Any]] = {"HS256": hashlib.sha256, "HS384": hashlib.sha384, "HS512": hashlib.sha512}
DEFAULT_ALGORITHM = "HS256"
# Pulsar's key library refuses HMAC keys shorter than the hash (256 bits for HS256).
MIN_SECRET_KEY_BYTES = 32
_DATA_BASE64 = "data:;base64,"


class TokenError(ValueError):
    """A token or secret key that cannot be used; the message says what is wrong with it."""


@dataclass(frozen=True)
class TokenClaims:
    """What a verified token says: its subject (role) and when it expires (None: never)."""

    subject: str
    expires_at: float | None = None


def create_secret_key() -> bytes:
    """A new random secret key, as long as HS256 wants it."""
    return secrets.token_bytes(MIN_SECRET_KEY_BYTES)


def read_secret_key(source: str | Path) -> bytes:
    """The secret key from a file path, a ``file:`` URL or a ``data:;base64,...`` URL.

    A file holds the raw key bytes, or ``data:;base64,`` followed by the key in base64.
    """
    text = str(source)
    if text.startswith("data:"):
        return _checked_key(_decode_data_url(text), "the data: URL")
    path = Path(unquote(urlsplit(text).path)) if text.startswith("file:") else Path(text)
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise TokenError(f"cannot read the secret key file {path}: {exc.strerror or exc}") from None
    if content.startswith(b"data:"):
        return _checked_key(_decode_data_url(content.decode("ascii", "replace").strip()), str(path))
    return _checked_key(content, str(path))


def create_token(
    secret: bytes, subject: str, expires_at: float | None = None, algorithm: str = DEFAULT_ALGORITHM
) -> str:
    """A signed token for ``subject``, valid until ``expires_at`` (epoch seconds) or for ever."""
    if not subject:
        raise TokenError("a token needs a non-empty subject")
    digest = _digest(algorithm)
    _checked_key(secret, "the secret key")
    claims: dict[str, Any] = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    signing_input = _encode_json({"alg": algorithm}) + "." + _encode_json(claims)
    signature = hmac.new(secret, signing_input.encode("ascii"), digest).digest()
    return signing_input + "." + _b64encode(signature)


def verify_token(token: str, secret: bytes, now: float | None = None) -> TokenClaims:
    """Check the token's signature, expiry and subject; raises TokenError saying why it is refused."""
    parts = token.split(".")
    if len(parts) != 3 or not all(parts):
        raise TokenError("not a signed JWT (expected three non-empty dot-separated parts)")
    digest = _digest(_decode_json(parts[0], "header").get("alg"))
    claims = _decode_json(parts[1], "claims")  # decoding first also proves both parts are ASCII
    expected = hmac.new(secret, f"{parts[0]}.{parts[1]}".encode("ascii"), digest).digest()
    if not hmac.compare_digest(expected, _b64decode(parts[2], "signature")):
        raise TokenError("signature does not match the secret key")
    now = time.time() if now is None else now
    expires_at = _time_claim(claims, "exp")
    if expires_at is not None and now >= expires_at:
        raise TokenError(f"token expired at {_iso(expires_at)} (now {_iso(now)})")
    not_before = _time_claim(claims, "nbf")
    if not_before is not None and now < not_before:
        raise TokenError(f"token not valid before {_iso(not_before)} (now {_iso(now)})")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise TokenError("token has no subject ('sub' claim)")
    return TokenClaims(subject, expires_at)


def _digest(algorithm: Any) -> Callable[..., Any]:
    digest = _DIGESTS.get(algorithm) if isinstance(algorithm, str) else None
    if digest is None:
        raise TokenError(f"unsupported signing algorithm {algorithm!r} (expected one of {', '.join(_DIGESTS)})")
    return digest


def _checked_key(key: bytes, where: str) -> bytes:
    if len(key) < MIN_SECRET_KEY_BYTES:
        raise TokenError(
            f"the secret key in {where} has {len(key)} bytes; at least {MIN_SECRET_KEY_BYTES} (256 bits) are needed"
        )
    return key


def _decode_data_url(url: str) -> bytes:
    if not url.startswith(_DATA_BASE64):
        raise TokenError(f"a secret key data: URL must start with {_DATA_BASE64!r}")
    try:
        return base64.b64decode(url[len(_DATA_BASE64) :], validate=True)
    except binascii.Error as exc:
        raise TokenError(f"the secret key data: URL is not valid base64: {exc}") from None


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
