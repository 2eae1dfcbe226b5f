"""Message: one received message, as the official Python client's ``pulsar.Message`` exposes it.

Receiving stays cheap by deferring what a user may never look at. The messages of one entry
share a :class:`Delivery` (position, entry metadata, the consumer that received it); a message
adds only its payload, its index in the batch and its single-message metadata, which stays raw
bytes until a key, property or timestamp is asked for. The MessageId is built on first request.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, final

from ..crypto import EncryptionContext
from ..protocol.message_id import MessageId, with_topic
from ..protocol.PulsarApi_pb2 import MessageMetadata, SingleMessageMetadata
from ..schema import Schema
from .ack_grouping import AckGroupingTracker, UnackedIndexes


class DecodingSettings(Protocol):
    """A consumer's settings, as its messages read them: the schema that decodes ``value()``."""

    @property
    def schema(self) -> Schema[Any]: ...


class DeliveryOwner(Protocol):
    """The partition consumer an entry was delivered to, as the holders of its messages use it:
    the user facade routes an ack by ``topic``, a reader acknowledges cumulatively through ``acks``,
    ``Message.value()`` decodes with ``settings.schema``."""

    topic: str
    acks: AckGroupingTracker

    @property
    def settings(self) -> DecodingSettings: ...

    def acknowledge(self, target: Message | MessageId) -> None: ...


class Delivery:
    """One entry as the broker delivered it to a partition consumer: what its messages share.

    ``epoch`` is the consumer's epoch at delivery (a message of an older epoch is dropped unread);
    ``batch_size`` is 0 for an entry that is not a batch, ``unacked`` its ack state if it is one.
    ``metadata`` may be given serialized (a plain message's, see ``plain_metadata``): it is then
    parsed when first read.
    """

    __slots__ = (
        "owner",
        "epoch",
        "ledger_id",
        "entry_id",
        "partition",
        "batch_size",
        "_metadata",
        "topic",
        "redelivery_count",
        "id_topic",
        "unacked",
        "decryption_failed",
    )

    def __init__(
        self,
        owner: DeliveryOwner | None,
        epoch: int,
        ledger_id: int,
        entry_id: int,
        partition: int,
        batch_size: int,
        metadata: MessageMetadata | bytes,
        topic: str,
        redelivery_count: int = 0,
        id_topic: str | None = None,
    ):
        self.owner = owner
        self.epoch = epoch
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.partition = partition
        self.batch_size = batch_size
        self._metadata = metadata
        self.topic = topic
        self.redelivery_count = redelivery_count
        # Set on the ids of a multi-topic consumer's messages, so acks by id find their partition.
        self.id_topic = id_topic
        self.unacked: UnackedIndexes | None = None
        # Encrypted and not decrypted: delivered as it came, under ConsumerCryptoFailureAction.CONSUME.
        self.decryption_failed = False

    @property
    def metadata(self) -> MessageMetadata:
        """The entry's MessageMetadata."""
        metadata = self._metadata
        if type(metadata) is bytes:  # two threads may both parse it: the same fields either way
            metadata = self._metadata = MessageMetadata.FromString(metadata)
        return metadata  # type: ignore[return-value]


class MessageFields(NamedTuple):
    """Everything a table row of one message holds, read in one call (see ``Message.fields``)."""

    partition_key: str
    #: The payload, None for a null value (a tombstone).
    value: bytes | None
    ledger_id: int
    entry_id: int
    #: Index in the batch, -1 for a message that is a whole entry.
    batch_index: int
    publish_time: int
    #: The application's event time in ms, 0 if none was set.
    event_time: int
    properties: Sequence[tuple[str, str]]
    redelivery_count: int


# Builds a MessageFields from a plain tuple without NamedTuple's generated ``__new__`` (a Python
# call per message, on the ingestion hot path).
_new_fields = tuple.__new__


def text(value: str | bytes) -> str:
    """A string field of message metadata as protobuf gives it: a str, or the raw bytes where they
    are not UTF-8 (proto2 does not check; a producer may send any bytes), decoded as Java decodes
    a String, each malformed sequence as U+FFFD."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


@final  # consumers tell a Message from a MessageId by ``type(x) is Message``, the cheapest test
class Message:
    """A received message: payload, keys, properties, timestamps and its id.

    ``delivery`` (the entry it came in) and ``batch_index`` (-1 for a message that is a whole
    entry) are for the consumer that received it: acks read them directly, on the hot path.
    """

    __slots__ = ("_data", "delivery", "batch_index", "_single", "_id")

    def __init__(self, delivery: Delivery, index: int, data: bytes, single: bytes | SingleMessageMetadata | None):
        self.delivery = delivery
        self.batch_index = index
        self._data = data
        # Raw or parsed SingleMessageMetadata inside a batch, None otherwise.
        self._single = single
        self._id: MessageId | None = None

    def _source(self) -> Any:
        """Where the per-message fields live: the single-message metadata, or the entry's."""
        single = self._single
        if single is None:
            return self.delivery.metadata
        if type(single) is bytes:
            single = self._single = SingleMessageMetadata.FromString(single)
        return single

    def data(self) -> bytes:
        """The payload."""
        return self._data

    def value(self) -> Any:
        """The payload decoded by the consumer's schema (the payload itself with the default BytesSchema)."""
        owner = self.delivery.owner
        if owner is None:
            return self._data
        return owner.settings.schema.decode_message(self)

    def properties(self) -> dict[str, str]:
        """The application-defined properties (each malformed UTF-8 sequence reads as U+FFFD, as Java decodes it)."""
        return {text(kv.key): text(kv.value) for kv in self._source().properties}

    def partition_key(self) -> str:
        """The key used for routing and Key_Shared dispatch, or ``""`` (bytes that are not UTF-8
        with each malformed UTF-8 sequence read as U+FFFD; :meth:`key_bytes` gives them as they are)."""
        return text(self._source().partition_key)

    def key_bytes(self) -> bytes | None:
        """The partition key as bytes, base64-decoded when the producer encoded it so (a SEPARATED
        key/value key); None when the message has no key."""
        source = self._source()
        if not source.HasField("partition_key"):
            return None
        key = source.partition_key
        if type(key) is bytes:  # not UTF-8, so not base64 either: the bytes the producer sent
            return key
        if not source.partition_key_b64_encoded:
            return key.encode("utf-8")
        try:
            return base64.b64decode(source.partition_key, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"partition key {source.partition_key!r} is flagged base64 but is not: {exc}") from None

    def ordering_key(self) -> str:
        """The ordering key (Key_Shared takes it before the partition key), or ``""``."""
        return self._source().ordering_key.decode("utf-8", "replace")

    def publish_timestamp(self) -> int:
        """When the producer published it, in milliseconds since the epoch."""
        return self.delivery.metadata.publish_time

    def event_timestamp(self) -> int:
        """The application's event time in milliseconds, or 0 if none was set."""
        return self._source().event_time

    def message_id(self) -> MessageId:
        """Its position: ledger, entry, partition, and index inside a batch."""
        message_id = self._id
        if message_id is None:
            delivery = self.delivery
            message_id = MessageId(delivery.partition, delivery.ledger_id, delivery.entry_id, self.batch_index, delivery.batch_size)
            if delivery.id_topic is not None:
                with_topic(message_id, delivery.id_topic)
            self._id = message_id
        return message_id

    def topic_name(self) -> str:
        """The topic (partition) it was received from."""
        return self.delivery.topic

    def redelivery_count(self) -> int:
        """How often the broker delivered it before (Shared and Key_Shared count; others say 0)."""
        return self.delivery.redelivery_count

    def producer_name(self) -> str:
        """The name of the producer that sent it."""
        return self.delivery.metadata.producer_name

    def schema_version(self) -> str:
        """The schema version the producer set (the broker's 8 big-endian bytes), or ``""``. A string, one
        character per byte, as the official client returns it; ``.encode("latin-1")`` gives the bytes."""
        return self.delivery.metadata.schema_version.decode("latin-1")

    def has_null_value(self) -> bool:
        """Whether the producer sent a null value (a tombstone)."""
        return self._source().null_value

    def encryption_context(self) -> EncryptionContext | None:
        """How the message was encrypted (keys, IV, compression, batch size, whether decryption
        failed), or None when it was not encrypted."""
        metadata = self.delivery.metadata
        if not metadata.encryption_keys:
            return None
        return EncryptionContext(metadata, self.delivery.decryption_failed)

    def fields(self) -> MessageFields:
        """Everything a table row of this message holds, in one call, for readers that turn many
        messages into columns."""
        source = self._source()
        delivery = self.delivery
        properties = source.properties
        return _new_fields(MessageFields, (
            text(source.partition_key),
            None if source.null_value else self._data,
            delivery.ledger_id,
            delivery.entry_id,
            self.batch_index,
            delivery.metadata.publish_time,
            source.event_time,
            [(text(kv.key), text(kv.value)) for kv in properties] if properties else (),
            delivery.redelivery_count,
        ))

    def __repr__(self) -> str:
        return f"Message(topic={self.delivery.topic!r}, id={self.message_id()}, {len(self._data)} bytes)"
