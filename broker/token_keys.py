"""The keys of Pulsar's tokens, read as Pulsar reads ``tokenSecretKey`` and ``tokenPublicKey``.

A key is given as a file path, a ``file:`` URL, a ``data:;base64,...`` URL, or ``env:NAME``, the
environment variable NAME holding the key in base64, as a ``data:`` URL or (a public or private
key) in PEM; a file may also hold such a ``data:`` URL. A secret key is the raw bytes. A key pair is what ``pulsar tokens
create-key-pair`` writes: the private key in PKCS#8 and the public key in X.509
SubjectPublicKeyInfo, both DER; PEM is read too (OAuth2 issuers publish PEM).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from .tokens import MIN_SECRET_KEY_BYTES, PrivateKey, PublicKey, TokenError, algorithm_family, check_secret_key, key_family

_DATA_BASE64 = "data:;base64,"
ENV_PREFIX = "env:"
RSA_KEY_BITS = 2048
_CURVES: dict[str, Callable[[], ec.EllipticCurve]] = {"ES256": ec.SECP256R1, "ES384": ec.SECP384R1, "ES512": ec.SECP521R1}


def create_secret_key() -> bytes:
    """A new random secret key, as long as HS256 wants it."""
    return secrets.token_bytes(MIN_SECRET_KEY_BYTES)


def read_secret_key(source: str | Path) -> bytes:
    """The secret key from a file path, a ``file:`` URL, a ``data:;base64,...`` URL or ``env:NAME``."""
    key, where = _read_key_bytes(source, "secret key")
    return check_secret_key(key, where)


def read_public_key(source: str | Path, algorithm_name: str = "RS256") -> PublicKey:
    """The public key that checks tokens signed with ``algorithm_name``'s family (Pulsar's
    ``tokenPublicAlg``, RS256 by default)."""
    expected = algorithm_family(algorithm_name)
    if expected == "HMAC":
        raise TokenError(f"{algorithm_name} uses a secret key, not a public key: give an RS, PS or ES algorithm")
    data, where = _read_key_bytes(source, "public key")
    try:
        key = (
            serialization.load_pem_public_key(data)
            if data.lstrip().startswith(b"-----BEGIN")
            else serialization.load_der_public_key(data)
        )
    except ValueError as exc:
        raise TokenError(f"the public key in {where} is neither DER nor PEM: {exc}") from None
    if not isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey)) or key_family(key) != expected:
        raise TokenError(f"the public key in {where} is not an {expected} key, as {algorithm_name} needs")
    return key


def read_private_key(source: str | Path) -> PrivateKey:
    """The private key that signs tokens (DER PKCS#8, or PEM)."""
    data, where = _read_key_bytes(source, "private key")
    try:
        key = (
            serialization.load_pem_private_key(data, None)
            if data.lstrip().startswith(b"-----BEGIN")
            else serialization.load_der_private_key(data, None)
        )
    except (ValueError, TypeError) as exc:
        raise TokenError(f"the private key in {where} cannot be read (DER or PEM, unencrypted): {exc}") from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise TokenError(f"the private key in {where} is neither an RSA nor an EC key")
    return key


def create_key_pair(algorithm_name: str = "RS256") -> tuple[bytes, bytes]:
    """A new key pair for ``algorithm_name``: (private key PKCS#8 DER, public key X.509 DER)."""
    family = algorithm_family(algorithm_name)
    private: PrivateKey
    if family == "RSA":
        private = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    elif family == "EC":
        private = ec.generate_private_key(_CURVES[algorithm_name]())
    else:
        raise TokenError(f"{algorithm_name} uses a secret key: make one with create-secret-key")
    return (
        private.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )


def _read_key_bytes(source: str | Path, what: str) -> tuple[bytes, str]:
    """The key's bytes and a description of where they came from, for messages."""
    text = str(source)
    if text.startswith("data:"):
        return _decode_data_url(text, what), "the data: URL"
    if text.startswith(ENV_PREFIX):
        return _read_environment(text[len(ENV_PREFIX) :], what)
    path = Path(unquote(urlsplit(text).path)) if text.startswith("file:") else Path(text)
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise TokenError(f"cannot read the {what} file {path}: {exc.strerror or exc}") from None
    if content.startswith(b"data:"):
        return _decode_data_url(content.decode("ascii", "replace").strip(), what), str(path)
    return content, str(path)


def _read_environment(name: str, what: str) -> tuple[bytes, str]:
    """A key from an environment variable: a ``data:`` URL, PEM text, or base64."""
    where = f"the environment variable {name}"
    value = os.environ.get(name)
    if not value:
        raise TokenError(f"{where}, named for the {what}, is not set")
    value = value.strip()
    if value.startswith("data:"):
        return _decode_data_url(value, what), where
    if value.startswith("-----BEGIN"):
        return value.encode(), where
    try:
        return base64.b64decode(value, validate=True), where
    except binascii.Error:
        raise TokenError(f"{where} holds no {what}: give it in base64, PEM or as a data:;base64, URL") from None


def _decode_data_url(url: str, what: str) -> bytes:
    if not url.startswith(_DATA_BASE64):
        raise TokenError(f"a {what} data: URL must start with {_DATA_BASE64!r}")
    try:
        return base64.b64decode(url[len(_DATA_BASE64) :], validate=True)
    except binascii.Error as exc:
        raise TokenError(f"the {what} data: URL is not valid base64: {exc}") from None
