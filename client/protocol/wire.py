"""The client's hand-coded protobuf codec: every message written or read without the generated classes.

A message built through the generated classes costs an object per field and per message; the
metadata of an unkeyed entry and the commands sent once per entry (SEND, SEND_RECEIPT, MESSAGE,
ACK) are small and fixed enough to be written as bytes. The per-message metadata inside a batch
payload is coded the same way, in :mod:`.batch`. Everything else goes through ``PulsarApi_pb2``.

Fields are written in field-number order, as protobuf serializes them, so the bytes equal the
generated classes' bytes. Field keys (number and wire type) are read from the proto descriptors
once, at import, into module constants: a call costs what writing literal bytes would.

The fast paths, and the tests in ``tests/unit/test_wire_codec.py`` proving each equal to the
generated classes:

- :func:`varint`: ``test_varint_matches_protobuf``, ``test_varint_refuses_what_protobuf_cannot_hold``.
- :func:`tag`: ``test_tags_match_protobuf``.
- :class:`PlainMetadata`, :func:`encode_plain_metadata` (MessageMetadata of an unkeyed entry):
  ``test_plain_metadata_matches_protobuf``, ``test_plain_metadata_encoder_matches_protobuf``.
- :class:`SendEncoder`, :func:`encode_send`, :func:`encode_send_receipt`, :func:`encode_message`, :func:`encode_ack`:
  ``test_encode_send_matches_make``, ``test_send_encoder_matches_make_for_each_send_of_its_producer``,
  ``test_encode_send_receipt_matches_make``, ``test_encode_message_matches_make``, ``test_encode_ack_matches_make``,
  and decoded back by ``test_encoded_commands_decode_to_their_ids``.
- :data:`U64_MASK` and :func:`signed64` (the int64 ids of the clients against the uint64 fields of the wire):
  ``test_signed64_matches_protobuf_int64``, ``test_signed64_inverts_the_mask``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .PulsarApi_pb2 import (
    BaseCommand,
    CommandAck,
    CommandMessage,
    CommandSend,
    CommandSendReceipt,
    MessageIdData,
    MessageMetadata,
)

__all__ = [
    "U64_MASK", "PlainMetadata", "SendEncoder", "encode_ack", "encode_message", "encode_plain_metadata",
    "encode_send", "encode_send_receipt", "signed64", "tag", "varint",
]

# Ledger and entry ids (and the int64 words of an ack_set) are signed in the clients; uint64 id
# fields carry them as their two's complement: "earliest" (-1) travels as 2**64 - 1.
U64_MASK = (1 << 64) - 1
_I64_SIGN = 1 << 63
_U64_SPAN = 1 << 64


def signed64(value: int) -> int:
    """The int64 whose two's complement is ``value`` (0 <= value < 2**64); ``value & U64_MASK`` inverts it."""
    return value - _U64_SPAN if value >= _I64_SIGN else value


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def varint(value: int) -> bytes:
    """The base-128 varint of ``value`` (0 <= value < 2**64).

    A negative int32 or int64 field is written as its 64-bit two's complement, as protobuf
    does: pass ``value & U64_MASK``.
    """
    if value < 0x80:
        if value < 0:
            raise ValueError(f"a varint holds 0 .. 2**64 - 1, not {value}")
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes((value & 0x7F | 0x80, value >> 7))
    if value < 0x200000:  # sequence ids, sizes: spelled out up to four bytes, no loop
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    if value < 0x10000000:
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14 & 0x7F | 0x80, value >> 21))
    if value >> 64:
        raise ValueError(f"a varint holds 0 .. 2**64 - 1, not {value}")
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Protobuf wire types (varint 0, 64-bit 1, length-delimited 2, 32-bit 5) by field type. Zigzag
# (sint) and group fields are left out: nothing here writes them, and their values need more than a key.
_F = FieldDescriptor
_WIRE_TYPES = {
    **dict.fromkeys((_F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_UINT32, _F.TYPE_UINT64, _F.TYPE_BOOL, _F.TYPE_ENUM), 0),
    **dict.fromkeys((_F.TYPE_FIXED64, _F.TYPE_SFIXED64, _F.TYPE_DOUBLE), 1),
    **dict.fromkeys((_F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE), 2),
    **dict.fromkeys((_F.TYPE_FIXED32, _F.TYPE_SFIXED32, _F.TYPE_FLOAT), 5),
}


def tag(message: type[Message], field: str) -> bytes:
    """The key protobuf writes before a value of ``message``'s ``field``: field number and wire type, as a varint."""
    descriptor = message.DESCRIPTOR.fields_by_name[field]
    return varint(descriptor.number << 3 | _WIRE_TYPES[descriptor.type])


_TRUE = varint(1)

# MessageMetadata of an unkeyed entry.
_META_PRODUCER_NAME = tag(MessageMetadata, "producer_name")
_META_SEQUENCE_ID = tag(MessageMetadata, "sequence_id")
_META_PUBLISH_TIME = tag(MessageMetadata, "publish_time")
_META_COMPRESSION = tag(MessageMetadata, "compression")
_META_UNCOMPRESSED_SIZE = tag(MessageMetadata, "uncompressed_size")
_META_NUM_MESSAGES = tag(MessageMetadata, "num_messages_in_batch")
_META_HIGHEST_SEQUENCE_ID = tag(MessageMetadata, "highest_sequence_id")

# The commands sent once per entry, and the message id inside two of them.
_SEND_PRODUCER_ID = tag(CommandSend, "producer_id")
_SEND_SEQUENCE_ID = tag(CommandSend, "sequence_id")
_SEND_NUM_MESSAGES = tag(CommandSend, "num_messages")
_SEND_TXNID_LEAST_BITS = tag(CommandSend, "txnid_least_bits")
_SEND_TXNID_MOST_BITS = tag(CommandSend, "txnid_most_bits")
_SEND_HIGHEST_SEQUENCE_ID = tag(CommandSend, "highest_sequence_id")
_SEND_IS_CHUNK = tag(CommandSend, "is_chunk") + _TRUE
_SEND_ONE_MESSAGE = _SEND_NUM_MESSAGES + varint(1)
_RECEIPT_PRODUCER_ID = tag(CommandSendReceipt, "producer_id")
_RECEIPT_SEQUENCE_ID = tag(CommandSendReceipt, "sequence_id")
_RECEIPT_MESSAGE_ID = tag(CommandSendReceipt, "message_id")
_RECEIPT_HIGHEST_SEQUENCE_ID = tag(CommandSendReceipt, "highest_sequence_id")
_MESSAGE_CONSUMER_ID = tag(CommandMessage, "consumer_id")
_MESSAGE_MESSAGE_ID = tag(CommandMessage, "message_id")
_MESSAGE_REDELIVERY_COUNT = tag(CommandMessage, "redelivery_count")
_ID_LEDGER = tag(MessageIdData, "ledgerId")
_ID_ENTRY = tag(MessageIdData, "entryId")
_ID_PARTITION = tag(MessageIdData, "partition")


def _envelope(command_type: int) -> bytes:
    """What precedes a command's serialized body in its BaseCommand: the type, then the key of the
    body's field (in Pulsar's schema numbered like the type), as protobuf writes them."""
    body_field = BaseCommand.DESCRIPTOR.fields_by_number[command_type].name
    return tag(BaseCommand, "type") + varint(command_type) + tag(BaseCommand, body_field)


_SEND_ENVELOPE = _envelope(BaseCommand.SEND)
RECEIPT_ENVELOPE = _envelope(BaseCommand.SEND_RECEIPT)  # also read by ``frames``
MESSAGE_ENVELOPE = _envelope(BaseCommand.MESSAGE)  # also read by ``message_command``
_ACK_ENVELOPE = _envelope(BaseCommand.ACK)
_ACK_HEAD = (tag(CommandAck, "consumer_id"), tag(CommandAck, "ack_type"), tag(CommandAck, "message_id"))
_ID_ACK_SET, _ID_BATCH_SIZE = tag(MessageIdData, "ack_set"), tag(MessageIdData, "batch_size")


class PlainMetadata:
    """Serialized MessageMetadata of one producer's entries without keys, properties or event time,
    the producer name's bytes encoded once and the publish time's once per millisecond.

    The bytes equal the generated class's: compression and uncompressed size are written only
    for a codec other than NONE, as the producer sets them. Not thread-safe (one per producer).
    """

    __slots__ = ("_head", "_time", "_time_field")

    def __init__(self, producer_name: str):
        name = producer_name.encode("utf-8")
        self._head = _META_PRODUCER_NAME + varint(len(name)) + name + _META_SEQUENCE_ID
        self._time = -1
        self._time_field = b""

    def encode(
        self, sequence_id: int, publish_time: int, compression: int = 0, uncompressed_size: int = 0,
        num_messages_in_batch: int | None = None, highest_sequence_id: int | None = None,
    ) -> bytes:
        """The metadata of one entry."""
        if publish_time != self._time:
            self._time, self._time_field = publish_time, _META_PUBLISH_TIME + varint(publish_time)
        metadata = self._head + varint(sequence_id) + self._time_field
        if compression:
            metadata += _META_COMPRESSION + varint(compression) + _META_UNCOMPRESSED_SIZE + varint(uncompressed_size)
        if num_messages_in_batch is not None:
            metadata += _META_NUM_MESSAGES + varint(num_messages_in_batch)
        if highest_sequence_id is not None:
            metadata += _META_HIGHEST_SEQUENCE_ID + varint(highest_sequence_id)
        return metadata


def encode_plain_metadata(
    producer_name: str, sequence_id: int, publish_time: int, compression: int = 0, uncompressed_size: int = 0,
    num_messages_in_batch: int | None = None, highest_sequence_id: int | None = None,
) -> bytes:
    """A serialized MessageMetadata without keys, properties or event time (see :class:`PlainMetadata`)."""
    return PlainMetadata(producer_name).encode(
        sequence_id, publish_time, compression, uncompressed_size, num_messages_in_batch, highest_sequence_id
    )


class SendEncoder:
    """Serialized SEND commands of one producer id, its bytes encoded once (as ``commands.make(SEND, ...)``
    serializes them)."""

    __slots__ = ("producer_id", "_head")

    def __init__(self, producer_id: int):
        self.producer_id = producer_id
        self._head = _SEND_PRODUCER_ID + varint(producer_id) + _SEND_SEQUENCE_ID

    def encode(
        self, sequence_id: int, num_messages: int = 1, highest_sequence_id: int | None = None, is_chunk: bool = False,
        txn: tuple[int, int] | None = None,
    ) -> bytes:
        """The SEND of one entry: a message (the defaults), a batch, or a chunk; ``txn`` is the
        (most, least) bits of the transaction it is sent in."""
        body = self._head + varint(sequence_id) + (_SEND_ONE_MESSAGE if num_messages == 1 else _SEND_NUM_MESSAGES + varint(num_messages))
        if txn is not None:
            body += _SEND_TXNID_LEAST_BITS + varint(txn[1]) + _SEND_TXNID_MOST_BITS + varint(txn[0])
        if highest_sequence_id is not None:
            body += _SEND_HIGHEST_SEQUENCE_ID + varint(highest_sequence_id)
        if is_chunk:
            body += _SEND_IS_CHUNK
        return _SEND_ENVELOPE + _ONE_BYTE[len(body)] + body  # keys and six varints (an int32 among them): under 128 bytes


def encode_send(
    producer_id: int, sequence_id: int, num_messages: int, highest_sequence_id: int | None = None, is_chunk: bool = False
) -> bytes:
    """A serialized SEND command (see :class:`SendEncoder`)."""
    return SendEncoder(producer_id).encode(sequence_id, num_messages, highest_sequence_id, is_chunk)


def encode_send_receipt(producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int) -> bytes:
    """A serialized SEND_RECEIPT; a negative ledger or entry id (-1 for a duplicate) wraps to uint64."""
    position = _ID_LEDGER + varint(ledger_id & U64_MASK) + _ID_ENTRY + varint(entry_id & U64_MASK)
    sequence = varint(sequence_id)
    # Unbatched, the highest sequence id is the sequence id: one varint serves both.
    highest = sequence if highest_sequence_id == sequence_id else varint(highest_sequence_id)
    body = b"".join((
        _RECEIPT_PRODUCER_ID, varint(producer_id),
        _RECEIPT_SEQUENCE_ID, sequence,
        _RECEIPT_MESSAGE_ID, _ONE_BYTE[len(position)], position,  # two keys and two varints: under 128 bytes
        _RECEIPT_HIGHEST_SEQUENCE_ID, highest,
    ))
    return RECEIPT_ENVELOPE + varint(len(body)) + body


def encode_message(consumer_id: int, ledger_id: int, entry_id: int, partition: int, redelivery_count: int | None = None) -> bytes:
    """A serialized MESSAGE without an ack_set (``partition`` -1 is written, as int32 -1 is)."""
    position = (
        _ID_LEDGER + varint(ledger_id & U64_MASK)
        + _ID_ENTRY + varint(entry_id & U64_MASK)
        + _ID_PARTITION + varint(partition & U64_MASK)
    )
    body = _MESSAGE_CONSUMER_ID + varint(consumer_id) + _MESSAGE_MESSAGE_ID + varint(len(position)) + position
    if redelivery_count is not None:
        body += _MESSAGE_REDELIVERY_COUNT + varint(redelivery_count)
    return MESSAGE_ENVELOPE + varint(len(body)) + body


def encode_ack(
    consumer_id: int, ack_type: int, entries: Mapping[int, Iterable[int]], batches: Iterable[tuple[int, int, list[int], int]] = ()
) -> bytes:
    """A serialized ACK of whole entries, then of ``batches`` (ledger, entry, ack_set words, batch
    size): without a MessageIdData object per id. ``entries`` maps a ledger to its entry ids
    acknowledged whole; the ids are written in that order."""
    consumer_key, type_key, id_key = _ACK_HEAD
    parts = [consumer_key, varint(consumer_id), type_key, varint(ack_type)]
    for ledger, entry_ids in entries.items():
        head = _ID_LEDGER + varint(ledger & U64_MASK) + _ID_ENTRY  # a ledger's ids differ only from here on:
        prefixes = [id_key + _ONE_BYTE[len(head) + width] + head for width in range(11)]  # one prefix per varint width
        parts += [prefixes[len(entry_id)] + entry_id for entry_id in map(varint, [entry & U64_MASK for entry in entry_ids])]
    for ledger, entry, words, size in batches:
        fields = [_ID_LEDGER, varint(ledger & U64_MASK), _ID_ENTRY, varint(entry & U64_MASK)]
        fields += [_ID_ACK_SET + varint(word & U64_MASK) for word in words]
        position = b"".join((*fields, _ID_BATCH_SIZE, varint(size)))
        parts += (id_key, varint(len(position)), position)
    body = b"".join(parts)
    return _ACK_ENVELOPE + varint(len(body)) + body
