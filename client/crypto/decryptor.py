"""The consumer side of end-to-end encryption: find a data key the consumer can unwrap, decrypt.

An encrypted entry carries its data key wrapped once per key name. The consumer tries the data
keys it already unwrapped first (producers reuse a data key for hours, so this is the common
case); otherwise it asks its key reader for the private key of each name in turn until one
unwraps, and keeps that data key for the entries that follow. A data key unused for four hours is
forgotten, as the official clients do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..exceptions import CryptoError
from ..protocol.PulsarApi_pb2 import EncryptionKeys, MessageMetadata
from .encryptor import DATA_KEY_LIFETIME_SECONDS
from .keys import KeyReader

if TYPE_CHECKING:
    from .ciphers import DataKey

__all__ = ["MessageDecryptor"]

log = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview


class MessageDecryptor:
    """Decrypts the entries one consumer receives, with private keys from ``reader``."""

    def __init__(
        self, reader: KeyReader, lifetime_seconds: float = DATA_KEY_LIFETIME_SECONDS, clock: Callable[[], float] = time.monotonic
    ):
        self.reader = reader
        self._lifetime = lifetime_seconds
        self._clock = clock
        # The wrapped data key as the entry carries it -> (its cipher, when it was last used).
        self._data_keys: dict[bytes, tuple[DataKey, float]] = {}

    @property
    def cached_data_keys(self) -> int:
        """How many unwrapped data keys are kept."""
        return len(self._data_keys)

    def decrypt(self, metadata: MessageMetadata, payload: Buffer) -> bytes | None:
        """The entry's payload decrypted (still compressed, if it was), or None if no key of the
        reader unwraps its data key or the payload fails authentication (the reason is logged)."""
        iv = metadata.encryption_param
        data = bytes(payload)
        now = self._clock()
        keys = metadata.encryption_keys
        for encryption_key in keys:
            known = self._data_keys.get(encryption_key.value)
            if known is not None:
                self._data_keys[encryption_key.value] = (known[0], now)
                plain = known[0].open(iv, data)
                if plain is not None:
                    return plain
        reasons = []
        for encryption_key in keys:
            if encryption_key.value in self._data_keys:
                continue
            try:
                cipher = self._unwrap(encryption_key)
            except (CryptoError, ValueError) as exc:  # ValueError: what unwrapped is no AES-256 key
                reasons.append(str(exc))
                continue
            self._remember(encryption_key.value, cipher, now)
            plain = cipher.open(iv, data)
            if plain is not None:
                return plain
            reasons.append(f"the data key of {encryption_key.key!r} does not authenticate the payload")
        names = [k.key for k in keys]
        log.warning("cannot decrypt a message encrypted for %s: %s", names, "; ".join(reasons) or "no key unwraps its data key")
        return None

    def _unwrap(self, encryption_key: EncryptionKeys) -> DataKey:
        from . import ciphers  # cryptography loads with the first data key, not with the client

        name = encryption_key.key
        metadata = {kv.key: kv.value for kv in encryption_key.metadata}
        try:
            info = self.reader.get_private_key(name, metadata)
        except CryptoError:
            raise
        except Exception as exc:  # a user's reader may fail in any way; it counts as no key
            raise CryptoError(f"the key reader failed for {name!r}: {exc!r}") from exc
        return ciphers.DataKey(ciphers.unwrap_data_key(name, info.key, encryption_key.value))

    def _remember(self, wrapped: bytes, cipher: DataKey, now: float) -> None:
        horizon = now - self._lifetime
        for stale in [w for w, (_, used) in self._data_keys.items() if used < horizon]:
            del self._data_keys[stale]
        self._data_keys[wrapped] = (cipher, now)

