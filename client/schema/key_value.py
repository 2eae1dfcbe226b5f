"""KeyValueSchema: a key and a value, each with a schema of its own, in one message.

The wire forms are Pulsar's (the Java client defines them; the official Python client has no
KeyValue schema). INLINE puts both in the payload: a big-endian 32-bit length and the bytes of
the key, then the same for the value, -1 standing for a None side. SEPARATED puts only the value
in the payload; producers carry the key's bytes as the message key (base64, with
``partition_key_b64_encoded``), so that routing and Key_Shared dispatch see it.

The declaration packs the two schemas' definitions the same way and names them in properties
(``key.schema.name``, ``key.schema.type``, ``key.schema.properties``, the same for ``value``, and
``kv.encoding.type``), as the Java client and the broker read them.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, NamedTuple, TypeVar

from .base import EncodedMessage, Schema
from .info import SchemaInfo, SchemaType

__all__ = ["EncodedKeyValue", "KeyValue", "KeyValueEncodingType", "KeyValueSchema"]

K = TypeVar("K")
V = TypeVar("V")

_LENGTH = struct.Struct(">i")
_NONE_LENGTH = -1


class KeyValueEncodingType(IntEnum):
    """Where a key/value message carries its key (the official C++ client's numbers)."""

    INLINE = 0
    SEPARATED = 1


@dataclass(frozen=True)
class KeyValue(Generic[K, V]):
    """A key and a value; either may be None. Unpacks as ``key, value = pair``."""

    key: K | None
    value: V | None

    def __iter__(self) -> Iterator[K | V | None]:
        yield self.key
        yield self.value


class EncodedKeyValue(NamedTuple):
    """The encoded sides of a key/value; None for a None side (a null key or a null value)."""

    key: bytes | None
    value: bytes | None


def pack(key: bytes | None, value: bytes | None) -> bytes:
    """Both sides, each length-prefixed, in one byte string."""
    parts = []
    for side in (key, value):
        parts.append(_LENGTH.pack(_NONE_LENGTH if side is None else len(side)))
        parts.append(side or b"")
    return b"".join(parts)


def unpack(data: bytes) -> EncodedKeyValue:
    """The two sides :func:`pack` put into ``data``; ``ValueError`` if it is cut short."""
    sides: list[bytes | None] = []
    offset = 0
    for _ in range(2):
        if offset + _LENGTH.size > len(data):
            raise ValueError(f"Key/value data of {len(data)} bytes ends inside a length prefix")
        (length,) = _LENGTH.unpack_from(data, offset)
        offset += _LENGTH.size
        if length == _NONE_LENGTH:
            sides.append(None)
            continue
        if length < 0 or offset + length > len(data):
            raise ValueError(f"Key/value data of {len(data)} bytes announces {length} bytes at offset {offset}")
        sides.append(data[offset : offset + length])
        offset += length
    return EncodedKeyValue(sides[0], sides[1])


def _side_properties(side: str, info: SchemaInfo) -> dict[str, str]:
    return {
        f"{side}.schema.name": info.name(),
        f"{side}.schema.type": info.schema_type().name,
        # As the Java client writes a property map: compact JSON.
        f"{side}.schema.properties": json.dumps(info.properties(), separators=(",", ":"), sort_keys=True),
    }


class KeyValueSchema(Schema[KeyValue[K, V]]):
    """Key/value pairs, the key encoded by ``key_schema`` and the value by ``value_schema``.

    ``encode`` takes a :class:`KeyValue` or a ``(key, value)`` tuple. With SEPARATED encoding,
    ``encode`` gives only the value's bytes; producers use :meth:`encode_parts` to get the key's,
    and consumers decode with :meth:`decode_message` (or :meth:`decode_parts`), which read the key
    from the message key.
    """

    def __init__(
        self,
        key_schema: Schema[K],
        value_schema: Schema[V],
        encoding: KeyValueEncodingType = KeyValueEncodingType.INLINE,
    ):
        for name, schema in (("key_schema", key_schema), ("value_schema", value_schema)):
            if not isinstance(schema, Schema):
                raise TypeError(f"{name} must be a Schema, not {schema!r}")
        if encoding not in tuple(KeyValueEncodingType):
            raise ValueError(f"encoding must be a KeyValueEncodingType, not {encoding!r}")
        self.key_schema = key_schema
        self.value_schema = value_schema
        self.encoding = KeyValueEncodingType(encoding)
        key_info, value_info = key_schema.schema_info(), value_schema.schema_info()
        properties = {
            **_side_properties("key", key_info),
            **_side_properties("value", value_info),
            "kv.encoding.type": self.encoding.name,
        }
        definition = pack(key_info.schema_data(), value_info.schema_data())
        super().__init__(None, SchemaType.KEY_VALUE, definition, "KeyValue", properties)

    def encode_parts(self, obj: KeyValue[K, V] | tuple[K | None, V | None]) -> EncodedKeyValue:
        """The key's and the value's bytes, each encoded by its schema (None stays None)."""
        if isinstance(obj, KeyValue):
            key, value = obj.key, obj.value
        elif isinstance(obj, tuple) and len(obj) == 2:
            key, value = obj
        else:
            raise TypeError(f"KeyValueSchema encodes a KeyValue or a (key, value) tuple, not {obj!r}")
        return EncodedKeyValue(
            None if key is None else self.key_schema.encode(key),
            None if value is None else self.value_schema.encode(value),
        )

    def encode(self, obj: KeyValue[K, V] | tuple[K | None, V | None]) -> bytes:
        """INLINE: the key and the value; SEPARATED: the value only (empty for None)."""
        parts = self.encode_parts(obj)
        if self.encoding is KeyValueEncodingType.INLINE:
            return pack(parts.key, parts.value)
        return parts.value or b""

    def decode(self, data: bytes) -> KeyValue[K, V]:
        """The pair an INLINE payload holds. A SEPARATED payload lacks the key: ``ValueError``."""
        if self.encoding is KeyValueEncodingType.SEPARATED:
            raise ValueError("A SEPARATED key/value payload holds only the value: decode the message, or its parts")
        return self.decode_parts(*unpack(data))

    def decode_parts(self, key: bytes | None, value: bytes | None) -> KeyValue[K, V]:
        """The pair of an encoded key and value, each decoded by its schema (None stays None)."""
        return KeyValue(
            None if key is None else self.key_schema.decode(key),
            None if value is None else self.value_schema.decode(value),
        )

    def decode_message(self, msg: EncodedMessage) -> KeyValue[K, V]:
        """The pair a received message holds; with SEPARATED encoding, the key is the message key."""
        if self.encoding is KeyValueEncodingType.INLINE:
            return self.decode(msg.data())
        return self.decode_parts(msg.key_bytes(), None if msg.has_null_value() else msg.data())

    def __str__(self) -> str:
        return f"KeyValueSchema({self.key_schema}, {self.value_schema}, {self.encoding.name})"
