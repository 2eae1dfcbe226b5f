"""A MESSAGE's command read off its bytes, without the generated classes.

The reader thread meets one MESSAGE per entry delivered; parsing its BaseCommand with the
generated classes, checking its required fields and reading the few it holds through them costs
more than reading those fields off the bytes. :func:`read_message` reads exactly what the
brokers write and leaves anything else to the generated classes (``frames`` falls back to them),
so the two never disagree: ``tests/unit/test_message_command.py`` compares them on random
commands and on random bytes.
"""

from __future__ import annotations

from .PulsarApi_pb2 import CommandMessage, MessageIdData
from .wire import U64_MASK, tag, varint

# The keys of CommandMessage and of the MessageIdData inside it, as single bytes (every field
# number is below 16).
_KEY_CONSUMER_ID = tag(CommandMessage, "consumer_id")[0]
_KEY_MESSAGE_ID = tag(CommandMessage, "message_id")[0]
_KEY_REDELIVERY_COUNT = tag(CommandMessage, "redelivery_count")[0]
_KEY_ACK_SET = tag(CommandMessage, "ack_set")[0]
_KEY_CONSUMER_EPOCH = tag(CommandMessage, "consumer_epoch")[0]
_KEY_LEDGER, _KEY_ENTRY, _KEY_PARTITION = (tag(MessageIdData, name)[0] for name in ("ledgerId", "entryId", "partition"))
_U32_MASK = (1 << 32) - 1
# An int32 -1 (a partition of a non-partitioned topic), as protobuf writes it: ten bytes.
_MINUS_ONE = varint(U64_MASK)

MessageFields = tuple[int, int, int, int, tuple[int, ...]]


def read_message(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[MessageFields, int, int] | None:
    """((consumer id, ledger id, entry id, redelivery count, ack_set), where the entry id's varint
    starts, where it ends) of the serialized CommandMessage in ``buf[pos:end]``, read off the bytes;
    None for anything the generated class should read.

    Ids and ack_set words come back as :func:`signed64` gives them (the varints read here stay
    below 2**63, where both agree). None means: a field other than those the
    brokers write (consumer id, message id of ledger, entry and partition, redelivery count,
    unpacked ack_set words, consumer epoch), a message id given twice (protobuf would merge them),
    a varint of ten bytes, a missing required field, or bytes that do not parse.
    """
    consumer_id = ledger = entry = -1
    entry_at = entry_end = 0
    redelivery = 0
    ack_set: tuple[int, ...] = ()  # a tuple: the usual empty one is shared, not a list made per MESSAGE
    command_end = end
    in_id = False  # reading the message id's fields, up to ``end``; then the command's, up to ``command_end``
    while True:
        if pos >= end:
            if not in_id:
                break
            if ledger < 0 or entry < 0:
                return None
            in_id, end = False, command_end
            continue
        key = buf[pos]
        pos += 1
        if key == _KEY_MESSAGE_ID and not in_id:
            if ledger >= 0 or pos >= end:
                return None
            size = buf[pos]
            if size >= 0x80 or pos + 1 + size > end:
                return None
            pos += 1
            in_id, end = True, pos + size
            continue
        if key == _KEY_PARTITION and in_id and buf[pos : pos + 10] == _MINUS_ONE and pos + 10 <= end:
            pos += 10  # -1: not needed (the consumer knows its partition), and ten bytes long
            continue
        value = shift = 0
        value_at = pos
        while True:  # a varint, up to nine bytes (2**63 and above take ten: left to protobuf)
            if pos >= end or shift > 56:
                return None
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        if in_id:
            if key == _KEY_LEDGER:
                ledger = value
            elif key == _KEY_ENTRY:
                entry, entry_at, entry_end = value, value_at, pos
            elif key != _KEY_PARTITION:  # the partition is not needed: the consumer knows it
                return None
        elif key == _KEY_CONSUMER_ID:
            consumer_id = value
        elif key == _KEY_REDELIVERY_COUNT:
            redelivery = value & _U32_MASK
        elif key == _KEY_ACK_SET:
            ack_set += (value,)
        elif key != _KEY_CONSUMER_EPOCH:
            return None
    if consumer_id < 0 or ledger < 0:
        return None
    return (consumer_id, ledger, entry, redelivery, ack_set), entry_at, entry_end
