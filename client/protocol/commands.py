"""Building and inspecting BaseCommand envelopes.

In Pulsar's schema every command's field number in BaseCommand equals its ``Type`` value, so the
envelope field can be found from the type alone. The commands sent once per entry (SEND,
SEND_RECEIPT, MESSAGE) are also written by hand (``encode_send`` and friends): the same bytes
as :func:`make` gives, without building message objects.
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from .PulsarApi_pb2 import BaseCommand
from .wire import U64_MASK, varint

PROTOCOL_VERSION = 20

_FIELD_BY_TYPE: dict[int, str] = {
    field.number: field.name for field in BaseCommand.DESCRIPTOR.fields if field.message_type is not None
}


def type_name(command_type: int) -> str:
    """The Pulsar name of a command type, e.g. ``SEND``, or its number if unknown."""
    try:
        return BaseCommand.Type.Name(command_type)
    except ValueError:
        return str(command_type)


def field_name(command_type: int) -> str:
    """The BaseCommand field carrying a command of this type."""
    try:
        return _FIELD_BY_TYPE[command_type]
    except KeyError:
        raise ValueError(f"command type {type_name(command_type)} has no body we speak") from None


def make(command_type: int, **fields: Any) -> BaseCommand:
    """Build a BaseCommand of ``command_type`` whose body has ``fields`` set.

    Repeated and message fields take lists and messages; ``None`` values are left unset.
    """
    command = BaseCommand(type=command_type)
    body = getattr(command, field_name(command_type))
    body.SetInParent()
    for name, value in fields.items():
        if value is None:
            continue
        target = getattr(body, name)
        if hasattr(target, "CopyFrom") and not isinstance(value, (list, tuple)):
            target.CopyFrom(value)
        elif hasattr(target, "extend"):
            target.extend(value)
        else:
            setattr(body, name, value)
    return command


def body(command: BaseCommand) -> Any:
    """The typed body of a BaseCommand (``command.send`` for SEND, ...)."""
    return getattr(command, field_name(command.type))


def text_fault(message: Message) -> str | None:
    """The path of the first text field holding bytes that are not UTF-8, else None.

    Protobuf hands such a field over as ``bytes`` instead of ``str``; code reading a name from it
    would fail far from the cause. Sub-messages are searched only if their type has text fields.
    """
    for field, value in message.ListFields():
        values = value if _is_repeated(field) else (value,)
        if field.type == FieldDescriptor.TYPE_STRING:
            if any(isinstance(v, bytes) for v in values):
                return field.name
        elif field.type == FieldDescriptor.TYPE_MESSAGE and _has_text(field.message_type):
            for item in values:
                inner = text_fault(item)
                if inner is not None:
                    return f"{field.name}.{inner}"
    return None


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf 6.30 added ``is_repeated`` and protobuf 7 removed ``label``: ask what this one has.
    if _HAS_IS_REPEATED:
        return bool(field.is_repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


_HAS_IS_REPEATED = hasattr(FieldDescriptor, "is_repeated")


@functools.cache
def _has_text(descriptor: Descriptor) -> bool:
    return any(
        field.type == FieldDescriptor.TYPE_STRING
        or (field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not descriptor and _has_text(field.message_type))
        for field in descriptor.fields
    )


def _envelope(command_type: int, body: bytes) -> bytes:
    # BaseCommand: type (field 1), then the body in the field numbered like the type; one-byte
    # tags, which holds for the types below 16 coded here.
    return bytes((0x08, command_type, command_type << 3 | 2)) + varint(len(body)) + body


def encode_send(
    producer_id: int,
    sequence_id: int,
    num_messages: int,
    highest_sequence_id: int | None = None,
    is_chunk: bool = False,
) -> bytes:
    """A serialized SEND command (as ``make(SEND, ...)`` serializes it)."""
    body = b"\x08" + varint(producer_id) + b"\x10" + varint(sequence_id) + b"\x18" + varint(num_messages)
    if highest_sequence_id is not None:
        body += b"\x30" + varint(highest_sequence_id)
    if is_chunk:
        body += b"\x38\x01"
    return _envelope(BaseCommand.SEND, body)


def encode_send_receipt(producer_id: int, sequence_id: int, ledger_id: int, entry_id: int, highest_sequence_id: int) -> bytes:
    """A serialized SEND_RECEIPT; a negative ledger or entry id (-1 for a duplicate) wraps to uint64."""
    position = b"\x08" + varint(ledger_id & U64_MASK) + b"\x10" + varint(entry_id & U64_MASK)
    sequence = varint(sequence_id)
    # Unbatched, the highest sequence id is the sequence id: one varint serves both.
    highest = sequence if highest_sequence_id == sequence_id else varint(highest_sequence_id)
    body = b"".join(
        (b"\x08", varint(producer_id), b"\x10", sequence, b"\x1a", bytes((len(position),)), position, b"\x20", highest)
    )
    return _envelope(BaseCommand.SEND_RECEIPT, body)


def encode_message(consumer_id: int, ledger_id: int, entry_id: int, partition: int, redelivery_count: int | None = None) -> bytes:
    """A serialized MESSAGE without an ack_set (``partition`` -1 is written, as int32 -1 is)."""
    position = (
        b"\x08" + varint(ledger_id & U64_MASK) + b"\x10" + varint(entry_id & U64_MASK) + b"\x18" + varint(partition & U64_MASK)
    )
    body = b"\x08" + varint(consumer_id) + b"\x12" + varint(len(position)) + position
    if redelivery_count is not None:
        body += b"\x18" + varint(redelivery_count)
    return _envelope(BaseCommand.MESSAGE, body)
