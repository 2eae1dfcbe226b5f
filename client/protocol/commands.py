"""Building and inspecting BaseCommand envelopes.

In Pulsar's schema every command's field number in BaseCommand equals its ``Type`` value, so the
envelope field can be found from the type alone. The commands sent once per entry (SEND,
SEND_RECEIPT, MESSAGE) are also written by hand in :mod:`.wire` (``encode_send`` and friends):
the same bytes as :func:`make` gives, without building message objects.
"""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from .PulsarApi_pb2 import BaseCommand

PROTOCOL_VERSION = 20

_FIELD_BY_TYPE: dict[int, str] = {
    field.number: field.name for field in BaseCommand.DESCRIPTOR.fields if field.message_type is not None
}


def type_name(command_type: int) -> str:
    """The Pulsar name of a command type, e.g. ``SEND``, or its number if unknown."""
    try:
        return BaseCommand.Type.Name(BaseCommand.Type.ValueType(command_type))
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
    command = BaseCommand(type=BaseCommand.Type.ValueType(command_type))
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


def missing_body(command: BaseCommand) -> str | None:
    """The body field ``command``'s type requires and it lacks (None if present, or if the type's
    body has no required field). Protobuf checks required fields only of bodies that are there;
    an absent one reads as its defaults, a producer or consumer id 0, and would reach the wrong
    handler."""
    name = _REQUIRED_BODY.get(command.type)
    return name if name is not None and not command.HasField(name) else None  # type: ignore[arg-type]  # a body field's name


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
        return bool(field.is_repeated)  # type: ignore[attr-defined]  # protobuf >= 6.30; the stubs predate it
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _is_required(field: FieldDescriptor) -> bool:
    # As _is_repeated: ``is_required`` where ``label`` is gone.
    if _HAS_IS_REPEATED:
        return bool(field.is_required)  # type: ignore[attr-defined]  # protobuf >= 6.30; the stubs predate it
    return bool(field.label == FieldDescriptor.LABEL_REQUIRED)


_HAS_IS_REPEATED = hasattr(FieldDescriptor, "is_repeated")


@functools.cache
def _has_text(descriptor: Descriptor) -> bool:
    return any(
        field.type == FieldDescriptor.TYPE_STRING
        or (field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not descriptor and _has_text(field.message_type))
        for field in descriptor.fields
    )

# The types whose body has required fields, and that body's field.
_REQUIRED_BODY: dict[int, str] = {
    number: name
    for number, name in _FIELD_BY_TYPE.items()
    if any(_is_required(field) for field in BaseCommand.DESCRIPTOR.fields_by_number[number].message_type.fields)
}
