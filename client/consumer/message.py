"""Message: one received message, as the official Python client's ``pulsar.Message`` exposes it.

A message keeps references to its entry's metadata and (inside a batch) its own single-message
metadata; properties and keys are read from them only when asked, so receiving stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.message_id import MessageId
from ..protocol.PulsarApi_pb2 import MessageMetadata, SingleMessageMetadata

if TYPE_CHECKING:
    from .consumer import PartitionConsumer


class Message:
    """A received message: payload, keys, properties, timestamps and its id."""

    __slots__ = ("_data", "_id", "_meta", "_single", "_topic", "_redelivery_count", "_owner", "_epoch", "_chunk_ids")

    def __init__(
        self,
        data: bytes,
        message_id: MessageId,
        metadata: MessageMetadata,
        single: SingleMessageMetadata | None,
        topic: str,
        redelivery_count: int = 0,
        owner: PartitionConsumer | None = None,
        epoch: int = 0,
    ):
        self._data = data
        self._id = message_id
        self._meta = metadata
        self._single = single
        self._topic = topic
        self._redelivery_count = redelivery_count
        # The partition consumer that received it: acks go back through it.
        self._owner = owner
        self._epoch = epoch
        self._chunk_ids: list[MessageId] | None = None

    def data(self) -> bytes:
        """The payload."""
        return self._data

    def value(self) -> Any:
        """The payload decoded by the schema; only bytes are supported, so the payload itself."""
        return self._data

    def properties(self) -> dict[str, str]:
        """The application-defined properties."""
        source = self._single if self._single is not None else self._meta
        return {kv.key: kv.value for kv in source.properties}

    def partition_key(self) -> str:
        """The key used for routing and Key_Shared dispatch, or ``""``."""
        source = self._single if self._single is not None else self._meta
        return source.partition_key

    def ordering_key(self) -> str:
        """The ordering key (Key_Shared takes it before the partition key), or ``""``."""
        source = self._single if self._single is not None else self._meta
        return source.ordering_key.decode("utf-8", "replace")

    def publish_timestamp(self) -> int:
        """When the producer published it, in milliseconds since the epoch."""
        return self._meta.publish_time

    def event_timestamp(self) -> int:
        """The application's event time in milliseconds, or 0 if none was set."""
        source = self._single if self._single is not None else self._meta
        return source.event_time

    def message_id(self) -> MessageId:
        """Its position: ledger, entry, partition, and index inside a batch."""
        return self._id

    def topic_name(self) -> str:
        """The topic (partition) it was received from."""
        return self._topic

    def redelivery_count(self) -> int:
        """How often the broker delivered it before (Shared and Key_Shared count; others say 0)."""
        return self._redelivery_count

    def producer_name(self) -> str:
        """The name of the producer that sent it."""
        return self._meta.producer_name

    def schema_version(self) -> bytes:
        """The schema version the producer set, or empty bytes."""
        return self._meta.schema_version

    def has_null_value(self) -> bool:
        """Whether the producer sent a null value (a tombstone)."""
        source = self._single if self._single is not None else self._meta
        return source.null_value

    def __repr__(self) -> str:
        return f"Message(topic={self._topic!r}, id={self._id}, {len(self._data)} bytes)"
