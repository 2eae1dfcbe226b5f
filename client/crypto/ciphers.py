"""The ciphers of end-to-end encryption, from the ``cryptography`` package.

The payload is AES-256-GCM under a random data key; the data key is wrapped for each key name
with RSA and OAEP padding over SHA-1 and MGF1-SHA-1 (OpenSSL's OAEP defaults in the C++ client,
``RSA/NONE/OAEPWithSHA1AndMGF1Padding`` in the Java client). The Java client also accepts EC keys
(ECIES); the C++ client, whose behaviour this client follows, accepts RSA only.

``cryptography`` takes some 10 ms to import, so the encryptor and decryptor import this module
when they first make or unwrap a data key, not when the client is imported.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..exceptions import CryptoError

__all__ = ["DataKey", "unwrap_data_key", "wrap_data_key"]

_OAEP = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)


class DataKey:
    """An AES-256-GCM data key: seals payloads (the tag appended) and opens them."""

    def __init__(self, key: bytes):
        """ValueError if ``key`` is no AES key (not 16, 24 or 32 bytes)."""
        self._cipher = AESGCM(key)

    def seal(self, iv: bytes, payload: bytes) -> bytes:
        """``payload`` encrypted under ``iv``, with the 16-byte tag after the ciphertext."""
        return self._cipher.encrypt(iv, payload, None)

    def open(self, iv: bytes, sealed: bytes) -> bytes | None:
        """The payload ``sealed`` holds, or None if it fails authentication under this key."""
        try:
            return self._cipher.decrypt(iv, sealed, None)
        except (InvalidTag, ValueError):  # ValueError: an IV of a length GCM refuses
            return None


def wrap_data_key(key_name: str, public_pem: bytes, data_key: bytes) -> bytes:
    """``data_key`` encrypted with the RSA public key in ``public_pem``.

    Raises:
        CryptoError: the PEM holds no public key, or one that is not RSA.
    """
    try:
        public_key = serialization.load_pem_public_key(public_pem)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise CryptoError(f"the public key of {key_name!r} is not a PEM public key: {exc}") from None
    if not isinstance(public_key, rsa.RSAPublicKey):
        raise CryptoError(f"the public key of {key_name!r} is {_kind(public_key)}: only RSA keys are supported")
    try:
        return public_key.encrypt(data_key, _OAEP)
    except ValueError as exc:  # a key too small for OAEP over SHA-1 and a 32-byte data key
        raise CryptoError(f"cannot wrap the data key with the public key of {key_name!r}: {exc}") from None


def unwrap_data_key(key_name: str, private_pem: bytes, wrapped: bytes) -> bytes:
    """The data key in ``wrapped``, decrypted with the RSA private key in ``private_pem``.

    Raises:
        CryptoError: the PEM holds no usable private key, or it is not the key ``wrapped`` was made for.
    """
    try:
        private_key = serialization.load_pem_private_key(private_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise CryptoError(f"the private key of {key_name!r} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(private_key, rsa.RSAPrivateKey):
        raise CryptoError(f"the private key of {key_name!r} is {_kind(private_key)}: only RSA keys are supported")
    try:
        return private_key.decrypt(wrapped, _OAEP)
    except ValueError:
        raise CryptoError(f"the private key of {key_name!r} does not unwrap the message's data key") from None


def _kind(key: object) -> str:
    if isinstance(key, (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey)):
        return "an EC key"
    return f"a {type(key).__name__}"
