"""Where the RSA keys of end-to-end encryption come from.

A producer wraps its AES data key with the public key of every key name it encrypts for; a
consumer unwraps it with the private key of whichever name it holds (:mod:`.ciphers`). Both ask a
key reader for the key of a name, as PEM bytes plus metadata: the metadata a producer's reader
returns travels in the message with the wrapped key, and a consumer's reader is handed it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..exceptions import CryptoError

__all__ = ["CryptoKeyReader", "EncryptionKeyInfo", "KeyReader"]


@dataclass(frozen=True)
class EncryptionKeyInfo:
    """One key as a reader returns it: PEM bytes, and metadata to send along with the wrapped data key."""

    key: bytes
    metadata: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class KeyReader(Protocol):
    """What producers and consumers ask for keys: :class:`CryptoKeyReader`, or any object with
    these two methods (to pick a key file by name, or fetch keys from a vault)."""

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        """The public key a producer wraps its data key with for ``key_name``."""
        ...

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        """The private key a consumer unwraps the data key of ``key_name`` with; ``metadata`` is
        what the producer's reader returned with the public key."""
        ...


class CryptoKeyReader:
    """The official default key reader: one public and one private PEM file, whatever the key name.

    The files are read on each request, so a key replaced on disk is picked up by the next data
    key a producer generates (every four hours) and by the next data key a consumer meets.
    """

    def __init__(self, public_key_path: str, private_key_path: str):
        for name, value in (("public_key_path", public_key_path), ("private_key_path", private_key_path)):
            if not isinstance(value, str):
                raise ValueError(f"Argument {name} is expected to be of type 'str' and not '{type(value).__name__}'")
        self.public_key_path = public_key_path
        self.private_key_path = private_key_path

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        """The public key file's contents (the same for every ``key_name``)."""
        return EncryptionKeyInfo(_read(self.public_key_path, "public", key_name))

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        """The private key file's contents (the same for every ``key_name``)."""
        return EncryptionKeyInfo(_read(self.private_key_path, "private", key_name))

    def __repr__(self) -> str:
        return f"CryptoKeyReader({self.public_key_path!r}, {self.private_key_path!r})"


def _read(path: str, kind: str, key_name: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise CryptoError(f"cannot read the {kind} key file {path!r} for key {key_name!r}: {exc.strerror}") from None

