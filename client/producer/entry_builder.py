"""Building entries: a batch, a single message or the chunks of one, as the bytes a SEND carries.

An entry is the checksum-covered region of a SEND frame, ``[u32 metadata size][MessageMetadata]
[payload]``, with its CRC32C. The builder writes the MessageMetadata (producer name, sequence id,
publish time, compression, per-message fields), compresses the payload, splits a message over
the broker's max message size into chunks and, for an encrypting producer, encrypts each entry's
payload after compression (each chunk on its own, as the official clients do). The SEND command around an entry is left to the
partition producer: its producer id changes with every connection while the entry does not, so a
resend after a reconnect writes the same bytes with the same checksum.
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

from ..crypto import MessageEncryptor
from ..exceptions import MessageTooBig
from ..protocol import checksum
from ..protocol.batch import set_message_fields
from ..protocol.compression import CompressionType, compress
from ..protocol.frames import encode_entry
from ..protocol.PulsarApi_pb2 import CompressionType as WireCompression
from ..protocol.PulsarApi_pb2 import MessageMetadata
from ..protocol.wire import PlainMetadata, tag, varint
from .batch_container import Batch
from .chunking import chunk_size_for, split_into_chunks
from .message import OutgoingMessage
from .stats import ProducerStats

__all__ = ["Entry", "EntryBuilder"]

_SCHEMA_VERSION = tag(MessageMetadata, "schema_version")
_U32 = struct.Struct(">I")


class Entry(NamedTuple):
    """One entry ready to write: ``data`` is ``[u32 metadata size][metadata][payload]``, ``checksum`` its CRC32C.

    A tuple: one per unbatched message, and a frozen dataclass costs two Python calls more to build.
    """

    data: bytes
    checksum: int


# Builds an Entry from a plain tuple without NamedTuple's generated ``__new__`` (half the cost, once per unbatched message).
_new_entry = tuple.__new__


class EntryBuilder:
    """Builds the entries of one partition producer and records their sizes in its stats (called
    under the partition producer's lock, the one writer of its WrittenCounts).

    ``producer_name``, ``max_message_size`` and ``schema_version`` come from the broker:
    :meth:`connected` sets them each time the producer is accepted, before anything is built.
    """

    __slots__ = (
        "producer_name",
        "max_message_size",
        "schema_version",
        "encryptor",
        "_schema_field",
        "_plain",
        "_transforms",
        "_compression",
        "_chunking",
        "_written",
        "_key_b64",
    )

    def __init__(
        self,
        compression: CompressionType,
        chunking_enabled: bool,
        stats: ProducerStats,
        key_b64: bool = False,
        encryptor: MessageEncryptor | None = None,
    ) -> None:
        self.producer_name = ""
        self.max_message_size = 0
        self.schema_version = b""
        # The schema_version field, encoded once; appended to the hand-coded metadata (protobuf
        # readers accept fields in any order).
        self._schema_field = b""
        self._plain = PlainMetadata("")
        # Whether payloads are compressed or encrypted: plain_entry then leaves them to message_entries.
        self._transforms = compression != CompressionType.NONE or encryptor is not None
        self._compression = compression
        self._chunking = chunking_enabled
        self._written = stats.written_counts()
        # Partition keys are base64 (the keys of a SEPARATED key/value schema): flagged so in the metadata.
        self._key_b64 = key_b64
        self.encryptor = encryptor

    def connected(self, producer_name: str, max_message_size: int, schema_version: bytes = b"") -> None:
        """Take the name the broker accepted the producer under, its connection's max message size and
        the version the broker gave the producer's schema (empty for none), which every entry carries."""
        self.producer_name = producer_name
        self.max_message_size = max_message_size
        self.schema_version = schema_version
        self._schema_field = _SCHEMA_VERSION + varint(len(schema_version)) + schema_version if schema_version else b""
        self._plain = PlainMetadata(producer_name)

    def batch_entry(self, batch: Batch, replicate_to: tuple[str, ...] = ()) -> Entry:
        """The entry of a drained batch: its messages' headers and payloads, compressed as one,
        replicated to ``replicate_to`` (the clusters all its messages name) if given."""
        count = batch.num_messages
        compression = self._compression
        payload = compress(compression, batch.payload)
        metadata = self._plain.encode(
            batch.first_sequence_id,
            time.time_ns() // 1_000_000,
            int(compression),
            len(batch.payload),
            count,
            # Written only for more than one sequence id, as the official clients do.
            batch.last_sequence_id if batch.last_sequence_id > batch.first_sequence_id else None,
        ) + self._schema_field
        if replicate_to or batch.partition_key is not None or batch.ordering_key is not None:
            # The first message's keys, as the official producers write a batch's metadata.
            metadata += MessageMetadata(
                replicate_to=replicate_to, partition_key=batch.partition_key, ordering_key=batch.ordering_key
            ).SerializePartialToString()
        self._written.record(count, len(batch.payload), len(payload), True)
        return self._sealed(metadata, payload)

    def plain_entry(self, content: bytes, sequence_id: int) -> Entry | None:
        """The entry of one unbatched message without keys, properties, event time or delivery, or
        None when it is to be compressed, encrypted or split (:meth:`message_entries` builds it then)."""
        size = len(content)
        if self._transforms or size > self.max_message_size:
            return None
        self._written.record(1, size, size, False)
        metadata = self._plain.encode(sequence_id, time.time_ns() // 1_000_000) + self._schema_field
        data = _U32.pack(len(metadata)) + metadata + content
        return _new_entry(Entry, (data, checksum.crc32c(data)))

    def message_entries(self, message: OutgoingMessage, sequence_id: int) -> list[Entry]:
        """The entry of one unbatched message numbered ``sequence_id``, or its chunks in order when
        it exceeds the max message size. A message without content is a null value: an empty
        payload flagged ``null_value``.

        A message that needs chunks always splits into two or more.

        Raises:
            MessageTooBig: the compressed message exceeds the max message size and chunking is off.
        """
        null_value = message.content is None
        content = b"" if message.content is None else message.content
        properties, partition_key, event_timestamp, delivery = message.props, message.key, message.event_time, message.delivery
        ordering_key = None if message.ordering is None else message.ordering.encode()
        compression = self._compression
        payload = compress(compression, content)
        size = len(content)
        self._written.record(1, size, len(payload), False)
        encryptor = self.encryptor
        # What encryption adds, counted against the limit (the official clients leave it to the
        # broker's headroom; counting it keeps every entry under the max message size).
        limit = self.max_message_size - (encryptor.overhead if encryptor is not None else 0)
        if len(payload) <= limit and (
            properties is None
            and partition_key is None
            and ordering_key is None
            and event_timestamp is None
            and not null_value
            and delivery is None
        ):
            metadata = self._plain.encode(sequence_id, time.time_ns() // 1_000_000, int(compression), size) + self._schema_field
            return [self._sealed(metadata, payload)]
        full = MessageMetadata(
            producer_name=self.producer_name, sequence_id=sequence_id, publish_time=time.time_ns() // 1_000_000
        )
        if compression != CompressionType.NONE:
            full.compression = WireCompression.ValueType(compression)
            full.uncompressed_size = size
        set_message_fields(full, properties, partition_key, ordering_key, event_timestamp)
        if self.schema_version:
            full.schema_version = self.schema_version
        if self._key_b64 and partition_key is not None:
            full.partition_key_b64_encoded = True
        if null_value:
            full.null_value = True
        if delivery is not None:
            delivery.stamp(full)  # every chunk carries it, as each copies this metadata
        if len(payload) <= limit:
            return [self._sealed(full, payload)]
        if not self._chunking:
            overhead = self.max_message_size - limit
            raise MessageTooBig(
                f"message of {len(payload)} bytes{f' (+{overhead} of encryption)' if overhead else ''} exceeds the "
                f"broker's max message size of {self.max_message_size} bytes "
                "(enable chunking_enabled with batching off to send it in chunks)"
            )
        chunks = split_into_chunks(bytes(payload), full, chunk_size_for(limit, full))
        return [self._sealed(chunk_metadata, part) for chunk_metadata, part in chunks]

    def _sealed(self, metadata: MessageMetadata | bytes, payload: bytes | bytearray | memoryview) -> Entry:
        """The entry of ``metadata`` and ``payload``, the payload encrypted if the producer encrypts."""
        encryptor = self.encryptor
        if encryptor is None:
            return _entry(metadata, payload)
        payload, fields = encryptor.encrypt(payload)
        # Appended serialized fields merge into the message, as protobuf defines it.
        serialized = metadata if isinstance(metadata, bytes) else metadata.SerializeToString()
        return _entry(serialized + fields, payload)


def _entry(metadata: MessageMetadata | bytes, payload: bytes | bytearray | memoryview) -> Entry:
    data = encode_entry(metadata, payload)
    return _new_entry(Entry, (data, checksum.crc32c(data)))
