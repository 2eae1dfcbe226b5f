"""The producer side of end-to-end encryption: one data key, wrapped for every key name.

An entry's payload, after compression (a batch as a whole, each chunk of a chunked message on
its own), is encrypted with AES-256-GCM under the producer's data key and a fresh random 12-byte
IV; the 16-byte tag follows the ciphertext. The metadata carries one ``encryption_keys`` entry per
key name (name, the data key wrapped with that name's public key, the reader's metadata) and the
IV as ``encryption_param``. ``encryption_algo`` stays unset, as both official clients leave it.

The data key and its wrapped copies are made once and reused, so consumers unwrap each data key
once; a new one is made every four hours, as the official clients do.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..exceptions import CryptoError
from ..protocol.PulsarApi_pb2 import EncryptionKeys, KeyValue, MessageMetadata
from ..protocol.wire import tag, varint
from .keys import KeyReader

if TYPE_CHECKING:
    from .ciphers import DataKey

__all__ = ["DATA_KEY_LIFETIME_SECONDS", "GCM_TAG_SIZE", "MessageEncryptor"]

log = logging.getLogger(__name__)

DATA_KEY_LIFETIME_SECONDS = 4 * 3600
DATA_KEY_SIZE = 32
IV_SIZE = 12
GCM_TAG_SIZE = 16
# After a failed rotation the old data key stays in use; the next attempt waits this long.
_ROTATION_RETRY_SECONDS = 60.0
_PARAM = tag(MessageMetadata, "encryption_param") + varint(IV_SIZE)


@dataclass(frozen=True)
class _DataKey:
    cipher: DataKey
    # The serialized encryption_keys entries, written into every entry's metadata as they are.
    keys_field: bytes
    renew_at: float


class MessageEncryptor:
    """Encrypts the payloads of one partition producer for ``key_names``, with keys from ``reader``.

    A key that cannot be read or used is logged when the producer starts; every send then
    tries again and fails with :class:`CryptoError` until it can (the official client's behaviour),
    so nothing goes out unencrypted.
    """

    def __init__(
        self,
        key_names: Sequence[str],
        reader: KeyReader,
        lifetime_seconds: float = DATA_KEY_LIFETIME_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.key_names = tuple(key_names)
        self.reader = reader
        self._lifetime = lifetime_seconds
        self._clock = clock
        self._key: _DataKey | None = None
        try:
            self._key = self._new_data_key()
        except CryptoError as exc:
            log.error("encryption keys %s are not usable yet; sends fail until they are: %s", self.key_names, exc)

    @property
    def overhead(self) -> int:
        """Bytes encryption adds to an entry: the metadata fields and the GCM tag."""
        return len(self._ready().keys_field) + len(_PARAM) + IV_SIZE + GCM_TAG_SIZE

    def check_ready(self) -> None:
        """Make sure a data key exists, making it now if the keys could not be used before.

        Raises:
            CryptoError: a key cannot be read, is not an RSA PEM key, or cannot wrap the data key.
        """
        self._ready()

    def encrypt(self, payload: bytes | bytearray | memoryview) -> tuple[bytes, bytes]:
        """(``payload`` encrypted with the tag appended, the MessageMetadata fields that go with it).

        The fields are serialized protobuf, to be appended to the entry's serialized metadata.
        """
        key = self._ready()
        if self._clock() >= key.renew_at:
            key = self._rotate(key)
        iv = os.urandom(IV_SIZE)
        return key.cipher.seal(iv, bytes(payload)), key.keys_field + _PARAM + iv

    def _ready(self) -> _DataKey:
        key = self._key
        if key is None:
            key = self._key = self._new_data_key()
        return key

    def _rotate(self, current: _DataKey) -> _DataKey:
        try:
            key = self._new_data_key()
        except CryptoError as exc:
            log.warning("keeping the current data key of %s: a new one cannot be wrapped: %s", self.key_names, exc)
            key = _DataKey(current.cipher, current.keys_field, self._clock() + _ROTATION_RETRY_SECONDS)
        self._key = key
        return key

    def _new_data_key(self) -> _DataKey:
        from . import ciphers  # cryptography loads with the first data key, not with the client

        data_key = os.urandom(DATA_KEY_SIZE)
        holder = MessageMetadata()
        for name in self.key_names:
            try:
                info = self.reader.get_public_key(name, {})
            except CryptoError:
                raise
            except Exception as exc:  # a user's reader may fail in any way; it must not escape as another error
                raise CryptoError(f"the key reader failed for {name!r}: {exc!r}") from exc
            holder.encryption_keys.append(
                EncryptionKeys(
                    key=name,
                    value=ciphers.wrap_data_key(name, info.key, data_key),
                    metadata=[KeyValue(key=k, value=v) for k, v in info.metadata.items()],
                )
            )
        return _DataKey(ciphers.DataKey(data_key), holder.SerializePartialToString(), self._clock() + self._lifetime)
