"""From an entry as the broker delivered it to the messages the application sees.

An entry (``[metadata size][MessageMetadata][payload]``) holds one message, a batch of them, or
one chunk of a large message. Unpacking decrypts (each chunk on its own, before reassembly, as
producers encrypt them), reassembles chunks, decompresses, splits a batch (leaving
out the indexes the broker's ack_set marks acknowledged, and what compaction emptied) and drops
what lies before the start message id of a reader or a seek.

Nothing here does I/O. What an entry cost the consumer is given back as a count of permits (one
per message the broker counted), so the caller can return those of the messages that were
discarded: malformed, duplicate, before the start, undecryptable, or a chunk that is not yet a
message. An entry that cannot be decrypted meets the consumer's ``crypto_failure_action``: FAIL keeps
it from the application, unacknowledged (the ack timeout, if set, redelivers it), DISCARD
acknowledges it, CONSUME delivers it as it came (a batch as one message) with the decryption
flagged failed on its encryption context.
"""

from __future__ import annotations

import logging
from typing import NamedTuple, Protocol

from ..crypto import ConsumerCryptoFailureAction, KeyReader, MessageDecryptor
from ..protocol.batch import BatchFormatError, read_batch, unacked_mask
from ..protocol.compression import Buffer, CompressionError, decompress
from ..protocol.frames import FrameError, MessageFrame, entry_metadata, split_entry
from ..protocol.message_id import MessageId
from ..protocol.plain_metadata import PlainShapes
from ..protocol.PulsarApi_pb2 import MessageMetadata
from .ack_grouping import AckGroupingTracker, UnackedIndexes
from .chunks import ChunkedMessageCollector
from .message import Delivery, DeliveryOwner, Message
from .unacked_tracker import UnackedMessageTracker

log = logging.getLogger(__name__)


def entry_permits(entry: bytes) -> int:
    """The permits an entry took: its batch's message count, 1 for any other entry or one that does not parse."""
    try:
        metadata, _ = split_entry(entry)
    except FrameError:
        return 1
    return max(metadata.num_messages_in_batch, 1)


class ReceivedEntry(NamedTuple):
    """An entry opened for a bulk reader (see ``Consumer.take_entries``): decrypted, reassembled
    and decompressed, but not split into messages.

    ``batch_size`` is 0 for an entry that is one message, its payload the message's; a batch's
    payload splits with :func:`~airflow_pulsar.client.protocol.batch.read_batch`, which leaves out
    what compaction emptied and, when ``wanted`` is not None, the indexes whose bit is clear in
    it (acknowledged before, or before a reader's start).
    """

    partition: int
    ledger_id: int
    entry_id: int
    redelivery_count: int
    metadata: MessageMetadata
    payload: bytes
    batch_size: int
    wanted: int | None

    def message_count(self) -> int:
        """The messages the entry counts for (the permits it took): its batch size, or 1."""
        return self.batch_size or 1

    def last_message_id(self) -> MessageId:
        """The id of the entry's last message: acknowledging it cumulatively acknowledges the entry."""
        size = self.batch_size
        return MessageId(self.partition, self.ledger_id, self.entry_id, size - 1 if size else -1, size)


# Builds a ReceivedEntry from a plain tuple without NamedTuple's generated ``__new__``.
_new_entry = tuple.__new__


class StartFilter:
    """Where a reader or a seek starts: messages before ``message_id`` (or at it, unless
    ``inclusive``) are dropped. ``message_id`` None lets everything through."""

    __slots__ = ("message_id", "inclusive")

    def __init__(self, message_id: MessageId | None, inclusive: bool):
        self.message_id = message_id
        self.inclusive = inclusive

    def reaches(self, ledger: int, entry: int) -> bool:
        """Whether messages of this entry may lie before the start (only ids of the same ledger compare)."""
        start = self.message_id
        return start is not None and ledger == start.ledger_id() and entry <= start.entry_id()

    def kept(self, ledger: int, entry: int, count: int) -> int:
        """The indexes of a batch of ``count`` messages in this entry that are not dropped, as a bitset."""
        return sum(1 << index for index in range(count) if not self.is_prior(ledger, entry, index))

    def is_prior(self, ledger: int, entry: int, index: int) -> bool:
        """Whether the message at batch ``index`` of this entry (-1: the whole entry) is to be dropped."""
        start = self.message_id
        if start is None or not self.reaches(ledger, entry):  # earliest and latest are of no ledger: they drop nothing
            return False
        if entry < start.entry_id():
            return True
        start_index = start.batch_index()
        if index < 0 or start_index < 0:
            return index < 0 and not self.inclusive
        return index < start_index or (index == start_index and not self.inclusive)


class CryptoSettings(Protocol):
    """A consumer's settings, as unpacking reads them: its key reader and what to do with an
    entry it cannot decrypt."""

    @property
    def crypto_key_reader(self) -> KeyReader | None: ...

    @property
    def crypto_failure_action(self) -> ConsumerCryptoFailureAction: ...


class EntryUnpacker:
    """Unpacks the entries of one topic partition.

    Chunks collect in ``chunks``; a batch entry's ack state and a chunked message's chunk ids are
    registered with ``acks``, which also says which entries are already acknowledged (a
    redelivery of those is dropped). ``id_topic`` is set on the ids of a multi-topic consumer's
    messages, so acks by id find their partition. Encrypted entries are decrypted with the
    ``crypto`` settings' key reader; one that cannot be is handled as their
    ``crypto_failure_action`` says, FAIL handing its id to ``unacked`` (the ack-timeout tracker).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        acks: AckGroupingTracker,
        chunks: ChunkedMessageCollector,
        start: StartFilter,
        id_topic: str | None = None,
        crypto: CryptoSettings | None = None,
        unacked: UnackedMessageTracker | None = None,
    ):
        self.topic = topic
        self.partition = partition
        self.acks = acks
        self.chunks = chunks
        self.start = start
        self.id_topic = id_topic
        reader = crypto.crypto_key_reader if crypto is not None else None
        self.decryptor = MessageDecryptor(reader) if reader is not None else None
        self.crypto_failure_action = crypto.crypto_failure_action if crypto is not None else ConsumerCryptoFailureAction.FAIL
        self.unacked = unacked
        self.plain = PlainShapes()

    def unpack(self, owner: DeliveryOwner | None, epoch: int, frame: MessageFrame) -> tuple[list[Message], int]:
        """(the messages of one entry for the application, the permits the entry took).

        ``frame`` is the MESSAGE that brought the entry (its message id, ack_set and redelivery
        count); ``owner`` and ``epoch`` are recorded on the messages' Delivery.
        """
        return self.unpack_run(owner, epoch, [frame])

    def unpack_run(self, owner: DeliveryOwner | None, epoch: int, frames: list[MessageFrame]) -> tuple[list[Message], int]:
        """(the messages of consecutive entries for the application, the permits the entries took):
        :meth:`unpack` of each, an entry of one plain message done here, without a call of its own:
        its metadata, when it has the shape of plain metadata seen before, left unparsed until read
        (see ``plain_metadata``)."""
        messages: list[Message] = []
        permits = 0
        start, acks, shapes = self.start, self.acks, self.plain
        partition, topic, id_topic = self.partition, self.topic, self.id_topic
        for frame in frames:
            _, ledger, entry_id, redelivery_count, _, entry = frame
            payload_at = shapes.payload_at(entry) if start.message_id is None else 0
            if payload_at:
                if acks.is_duplicate(ledger, entry_id):
                    permits += 1
                    continue
                delivery = Delivery(owner, epoch, ledger, entry_id, partition, 0, entry[4:payload_at], topic, redelivery_count, id_topic)
                messages.append(Message(delivery, -1, entry[payload_at:], None))
                permits += 1
                continue
            parsed = self._metadata(frame)
            if parsed is None:
                permits += 1
                continue
            metadata, payload_at = parsed
            if (
                not metadata.HasField("num_messages_in_batch") and not metadata.compression and not metadata.encryption_keys
                and metadata.num_chunks_from_msg <= 1 and start.message_id is None and not acks.is_duplicate(ledger, entry_id)
            ):  # one plain message: nothing to decrypt, reassemble, decompress or filter
                shapes.learn(entry[4:payload_at])
                delivery = Delivery(owner, epoch, ledger, entry_id, partition, 0, metadata, topic, redelivery_count, id_topic)
                messages.append(Message(delivery, -1, entry[payload_at:], None))
                permits += 1
            else:
                permits += self._unpack_entry(owner, epoch, frame, metadata, memoryview(entry)[payload_at:], messages)
        return messages, permits

    def unpack_entries(self, frames: list[MessageFrame]) -> tuple[list[ReceivedEntry], int]:
        """(the entries of consecutive MESSAGEs for the application, opened but not split into
        messages, and the permits the entries took): what :meth:`unpack_run` would make messages of."""
        entries: list[ReceivedEntry] = []
        permits = 0
        for frame in frames:
            parsed = self._metadata(frame)
            if parsed is None:
                permits += 1
                continue
            metadata, payload_at = parsed
            taken, opened, _, _ = self._open(frame, metadata, memoryview(frame.entry)[payload_at:])
            permits += taken
            if opened is not None:
                entries.append(opened)
        return entries, permits

    def _metadata(self, frame: MessageFrame) -> tuple[MessageMetadata, int] | None:
        """The MessageMetadata of the frame's entry and where its payload starts; None (logged) if malformed."""
        try:
            return entry_metadata(frame.entry)
        except FrameError as exc:
            log.error("discarding a malformed entry %d:%d of %s: %s", frame.ledger_id, frame.entry_id, self.topic, exc)
            return None

    def _unpack_entry(
        self, owner: DeliveryOwner | None, epoch: int, frame: MessageFrame, metadata: MessageMetadata, payload: Buffer,
        messages: list[Message],
    ) -> int:
        """Append the messages of an entry that is not one plain message to ``messages``; the permits it took."""
        permits, opened, state, undecrypted = self._open(frame, metadata, payload)
        if opened is None:
            return permits
        _, ledger, entry_id, redelivery_count, metadata, payload, count, wanted = opened
        delivery = Delivery(
            owner, epoch, ledger, entry_id, self.partition, count, metadata, self.topic, redelivery_count, self.id_topic
        )
        if not count:
            delivery.decryption_failed = undecrypted
            messages.append(Message(delivery, -1, payload, None))
            return permits
        delivery.unacked = state
        try:
            read_batch(payload, count, Message, delivery, wanted, messages)
        except BatchFormatError as exc:
            log.error("discarding the rest of batch %d:%d of %s: %s", ledger, entry_id, self.topic, exc)
        return permits

    def _open(
        self, frame: MessageFrame, metadata: MessageMetadata, payload: Buffer
    ) -> tuple[int, ReceivedEntry | None, UnackedIndexes | None, bool]:
        """Decrypt, reassemble and decompress an entry and pick the messages of it to deliver:
        (the permits it took, the entry or None when nothing of it is delivered, a batch's ack
        state, whether it could not be decrypted and is delivered as it came)."""
        _, ledger, entry_id, redelivery_count, ack_set, _ = frame
        batched = metadata.HasField("num_messages_in_batch")
        count = metadata.num_messages_in_batch if batched else 0
        permits = max(count, 1)
        if self.acks.is_duplicate(ledger, entry_id):
            return permits, None, None, False
        undecrypted = False
        if metadata.encryption_keys:
            decryptor = self.decryptor
            plain = decryptor.decrypt(metadata, payload) if decryptor is not None else None
            if plain is not None:
                payload = plain
            elif self.crypto_failure_action != ConsumerCryptoFailureAction.CONSUME:
                self._withhold(ledger, entry_id)
                return permits, None, None, False
            else:
                undecrypted = True
                count = 0  # a batch it cannot open reaches the application as one message
        chunk_ids = None
        if metadata.num_chunks_from_msg > 1:
            completed = self.chunks.add(metadata, bytes(payload), MessageId(self.partition, ledger, entry_id))
            self._ack_dropped_chunks()
            if completed is None:
                return 1, None, None, False  # a chunk is not a message: ask for the next one
            metadata, payload, chunk_ids = completed.metadata, completed.payload, completed.chunk_ids
        if not undecrypted:
            try:
                payload = decompress(metadata.compression, payload, metadata.uncompressed_size)
            except CompressionError as exc:
                log.error("discarding entry %d:%d of %s: %s", ledger, entry_id, self.topic, exc)
                return permits, None, None, False
        data = payload if type(payload) is bytes else bytes(payload)
        if not count:
            if self.start.is_prior(ledger, entry_id, -1):
                return permits, None, None, undecrypted
            if chunk_ids is not None:
                self.acks.track_chunks(ledger, entry_id, chunk_ids)
            opened = _new_entry(ReceivedEntry, (self.partition, ledger, entry_id, redelivery_count, metadata, data, 0, None))
            return permits, opened, None, undecrypted
        mask = unacked_mask(ack_set, count) if ack_set else None
        unacked = (1 << count) - 1 if mask is None else mask
        state = self.acks.track_batch(ledger, entry_id, unacked)
        if self.start.reaches(ledger, entry_id):  # the start entry, or one before it: test it once
            mask = unacked & self.start.kept(ledger, entry_id, count)
        opened = _new_entry(ReceivedEntry, (self.partition, ledger, entry_id, redelivery_count, metadata, data, count, mask))
        return count, opened, state, False

    def _withhold(self, ledger: int, entry_id: int) -> None:
        """An entry that cannot be decrypted, under FAIL or DISCARD."""
        if self.crypto_failure_action == ConsumerCryptoFailureAction.DISCARD:
            log.warning("discarding entry %d:%d of %s: it cannot be decrypted", ledger, entry_id, self.topic)
            self.acks.add_entry(ledger, entry_id)
            return
        log.error("withholding entry %d:%d of %s: it cannot be decrypted", ledger, entry_id, self.topic)
        if self.unacked is not None:
            self.unacked.add(MessageId(self.partition, ledger, entry_id))

    def _ack_dropped_chunks(self) -> None:
        # Chunks of a message dropped to make room, acknowledged so the broker does not redeliver them.
        dropped = self.chunks.dropped
        while dropped:
            chunk = dropped.pop()
            self.acks.add_entry(chunk.ledger_id(), chunk.entry_id())
