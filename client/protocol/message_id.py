"""MessageId: the position of a message in a topic, as the official Python client exposes it."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from google.protobuf.message import DecodeError

from .PulsarApi_pb2 import MessageIdData
from .wire import U64_MASK, signed64

__all__ = ["MessageId", "with_topic"]

_I64_MAX = (1 << 63) - 1


class MessagePosition(Protocol):
    """What :meth:`MessageId.wrap` reads of an id: ours, or the official client's ``pulsar.MessageId``."""

    def partition(self) -> int: ...
    def ledger_id(self) -> int: ...
    def entry_id(self) -> int: ...
    def batch_index(self) -> int: ...
_set = object.__setattr__


class MessageId:
    """Immutable id of a message: ledger, entry, and for partitioned topics and
    batches the partition index, the index inside the batch and the batch size.

    Ordering follows the official (C++ core) client: by ledger, then entry, then
    batch index, so a whole entry (batch index -1) sorts before its first batched
    message (index 0). The partition does not order ids of different positions;
    it only breaks ties, which keeps ``<``/``==`` a total order consistent with
    equality. Equality and hashing use ledger, entry, partition and batch index,
    not the batch size nor the topic, as the official client does.

    The constructor takes the official ``pulsar.MessageId``'s arguments in its
    order, ``MessageId(partition, ledger_id, entry_id, batch_index)``, plus the
    batch size, so ``MessageId()`` is :attr:`MessageId.earliest`.
    """

    __slots__ = ("_ledger_id", "_entry_id", "_partition", "_batch_index", "_batch_size", "_topic")
    # Set once, through object.__setattr__, since the class refuses assignment.
    _ledger_id: int
    _entry_id: int
    _partition: int
    _batch_index: int
    _batch_size: int
    _topic: str | None

    earliest: ClassVar[MessageId]
    """The position before the first message of a topic."""
    latest: ClassVar[MessageId]

    def __init__(
        self,
        partition: int = -1,
        ledger_id: int = -1,
        entry_id: int = -1,
        batch_index: int = -1,
        batch_size: int = 0,
    ) -> None:
        _set(self, "_partition", partition)
        _set(self, "_ledger_id", ledger_id)
        _set(self, "_entry_id", entry_id)
        _set(self, "_batch_index", batch_index)
        _set(self, "_batch_size", batch_size)
        _set(self, "_topic", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"MessageId is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"MessageId is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Needed because __setattr__ blocks pickle's default slot restore;
        # ids travel to Spark executors in ingest plans.
        fields = (self._partition, self._ledger_id, self._entry_id, self._batch_index, self._batch_size)
        if self._topic is None:
            return (MessageId, fields)
        return (_restore_with_topic, (*fields, self._topic))

    def topic_name(self) -> str | None:
        """The topic given to :meth:`deserialize`, or None (the official client's multi-topic hint)."""
        return self._topic

    def ledger_id(self) -> int:
        """Ledger that holds the entry."""
        return self._ledger_id

    def entry_id(self) -> int:
        """Entry inside the ledger."""
        return self._entry_id

    def partition(self) -> int:
        """Partition index, or -1 for a non-partitioned topic."""
        return self._partition

    def batch_index(self) -> int:
        """Index inside a batch entry, or -1 when the id names a whole entry."""
        return self._batch_index

    def batch_size(self) -> int:
        """Number of messages in the batch entry, or 0 when unknown or not batched."""
        return self._batch_size

    def _order_key(self) -> tuple[int, int, int, int]:
        return (self._ledger_id, self._entry_id, self._batch_index, self._partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return (
            self._ledger_id == other._ledger_id
            and self._entry_id == other._entry_id
            and self._batch_index == other._batch_index
            and self._partition == other._partition
        )

    def __hash__(self) -> int:
        return hash(self._order_key())

    def __lt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._order_key() < other._order_key()

    def __le__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._order_key() <= other._order_key()

    def __gt__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._order_key() > other._order_key()

    def __ge__(self, other: MessageId) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._order_key() >= other._order_key()

    def __str__(self) -> str:
        return f"({self._ledger_id},{self._entry_id},{self._partition},{self._batch_index})"

    def __repr__(self) -> str:
        return (
            f"MessageId(partition={self._partition}, ledger_id={self._ledger_id}, "
            f"entry_id={self._entry_id}, batch_index={self._batch_index}, "
            f"batch_size={self._batch_size})"
        )

    def to_proto(self, target: MessageIdData | None = None) -> MessageIdData:
        """Fill ``target`` (e.g. a sub-message of a command) or a new MessageIdData.

        Optional fields are set only when they differ from their defaults, exactly
        as the official client does, so serialized bytes match.
        """
        data = MessageIdData() if target is None else target
        # Ids are signed here but uint64 on the wire: "earliest" (-1) travels as 2**64 - 1.
        data.ledgerId = self._ledger_id & U64_MASK
        data.entryId = self._entry_id & U64_MASK
        if self._partition != -1:
            data.partition = self._partition
        if self._batch_index != -1:
            data.batch_index = self._batch_index
        if self._batch_size != 0:
            data.batch_size = self._batch_size
        return data

    @classmethod
    def from_proto(cls, data: MessageIdData) -> MessageId:
        """Build a MessageId from a MessageIdData (chunk and ack_set fields are ignored)."""
        return cls(
            data.partition,
            signed64(data.ledgerId),
            signed64(data.entryId),
            data.batch_index,
            data.batch_size,
        )

    def serialize(self) -> bytes:
        """Bytes that the official client's ``MessageId.deserialize`` accepts, and vice versa."""
        return self.to_proto().SerializeToString()

    @classmethod
    def deserialize(cls, message_id_bytes: bytes | bytearray | memoryview, topic: str | None = None) -> MessageId:
        """Parse bytes from :meth:`serialize` or from the official client's ``serialize()``.

        ``topic``, as in the official client, names the topic the id belongs to (needed by
        multi-topic consumers); it is kept and returned by :meth:`topic_name`.

        Raises:
            ValueError: the bytes are not a MessageIdData with ledger and entry ids.
        """
        message = MessageIdData()
        try:
            message.ParseFromString(message_id_bytes)  # type: ignore[arg-type]  # protobuf parses any bytes-like object
        except DecodeError as exc:
            raise ValueError(f"not a serialized MessageId: {exc}") from exc
        if not message.IsInitialized():
            raise ValueError("not a serialized MessageId: ledger or entry id missing")
        return with_topic(cls.from_proto(message), topic)

    @classmethod
    def wrap(cls, msg_id: MessagePosition) -> MessageId:
        """A MessageId equal to ``msg_id`` (the official method wraps the C++ core's id; ids here are
        already this class). An official ``pulsar.MessageId`` is taken through its accessors."""
        if isinstance(msg_id, MessageId):
            return msg_id
        if not all(callable(getattr(msg_id, name, None)) for name in ("partition", "ledger_id", "entry_id", "batch_index")):
            raise ValueError(f"Argument msg_id is expected to be a MessageId, got {msg_id!r}")
        return cls(msg_id.partition(), msg_id.ledger_id(), msg_id.entry_id(), msg_id.batch_index())


def with_topic(message_id: MessageId, topic: str | None) -> MessageId:
    """``message_id``, now naming ``topic`` as its :meth:`~MessageId.topic_name` (None: left as it is).

    The name is set in place, without a copy, for ids made per message: call it only on an id just
    built and not yet handed out. It takes no part in equality, ordering or hashing.
    """
    if topic is not None:
        _set(message_id, "_topic", topic)
    return message_id


def _restore_with_topic(
    partition: int, ledger_id: int, entry_id: int, batch_index: int, batch_size: int, topic: str
) -> MessageId:
    """Unpickle a MessageId that carries a topic name."""
    return with_topic(MessageId(partition, ledger_id, entry_id, batch_index, batch_size), topic)


MessageId.earliest = MessageId(-1, -1, -1)
MessageId.latest = MessageId(-1, _I64_MAX, _I64_MAX)
