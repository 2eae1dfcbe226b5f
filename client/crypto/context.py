"""What a consumer sees of a message's encryption: the official ``pulsar`` names and values.

``Message.encryption_context()`` returns an :class:`EncryptionContext` for every message that came
encrypted, decrypted or not, and None for one that did not. A consumer set to
:attr:`ConsumerCryptoFailureAction.CONSUME` gets a message it could not decrypt as the producer
sent it (a batch stays one message), and the context holds what the application needs to decrypt
and decompress it itself.
"""

from __future__ import annotations

import enum

from ..protocol.compression import CompressionType
from ..protocol.PulsarApi_pb2 import MessageMetadata

__all__ = ["ConsumerCryptoFailureAction", "EncryptionContext", "EncryptionKey"]


class ConsumerCryptoFailureAction(enum.IntEnum):
    """What a consumer does with a message it cannot decrypt; valued as ``pulsar.ConsumerCryptoFailureAction``."""

    #: Keep it from the application, unacknowledged: the ack timeout (if set) redelivers it.
    FAIL = 0
    #: Acknowledge it and drop it.
    DISCARD = 1
    #: Deliver it still encrypted (and compressed, and batched), with its encryption context.
    CONSUME = 2


class EncryptionKey:
    """One wrapped copy of a message's data key: the key name, the wrapped bytes and the metadata
    the producer's key reader gave with the public key."""

    __slots__ = ("_key", "_value", "_metadata")

    def __init__(self, key: str, value: bytes, metadata: dict[str, str]):
        self._key = key
        self._value = value
        self._metadata = metadata

    @property
    def key(self) -> str:
        """The key name."""
        return self._key

    @property
    def value(self) -> bytes:
        """The data key, encrypted with the public key of that name."""
        return self._value

    @property
    def metadata(self) -> dict[str, str]:
        """The key's metadata."""
        return dict(self._metadata)

    def __str__(self) -> str:
        return f"EncryptionKey(key={self.key}, value_len={len(self.value)}, metadata={self.metadata})"

    __repr__ = __str__


class EncryptionContext:
    """How a consumed message was encrypted and compressed, read from its entry's metadata."""

    __slots__ = ("_metadata", "_failed")

    def __init__(self, metadata: MessageMetadata, decryption_failed: bool):
        self._metadata = metadata
        self._failed = decryption_failed

    def keys(self) -> list[EncryptionKey]:
        """Every wrapped copy of the data key the message carries."""
        return [
            EncryptionKey(k.key, k.value, {kv.key: kv.value for kv in k.metadata}) for k in self._metadata.encryption_keys
        ]

    def param(self) -> bytes:
        """The AES-GCM initialization vector."""
        return self._metadata.encryption_param

    def algorithm(self) -> str:
        """The encryption algorithm the producer named; empty, as neither official client names it."""
        return self._metadata.encryption_algo

    def compression_type(self) -> CompressionType:
        """The codec applied before encryption."""
        return CompressionType(self._metadata.compression)

    def uncompressed_message_size(self) -> int:
        """The payload's size before compression, 0 when it is not compressed."""
        return self._metadata.uncompressed_size

    def batch_size(self) -> int:
        """The number of messages in the entry's batch, -1 when it is not a batch."""
        metadata = self._metadata
        return metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else -1

    def is_decryption_failed(self) -> bool:
        """Whether the consumer could not decrypt the message (delivered as sent, under ``CONSUME``)."""
        return self._failed

    def __str__(self) -> str:
        return (
            f"EncryptionContext(algorithm={self.algorithm()}, compression_type={self.compression_type().name}, "
            f"uncompressed_message_size={self.uncompressed_message_size()}, "
            f"is_decryption_failed={self.is_decryption_failed()}, keys=[{', '.join(str(k) for k in self.keys())}])"
        )

    __repr__ = __str__
