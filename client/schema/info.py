"""SchemaInfo: what a schema declares to the broker (type, name, definition, properties).

The broker keeps one registry entry per schema a producer or consumer declares; the entry is this
declaration. ``to_proto`` builds the ``Schema`` field of a PRODUCER or SUBSCRIBE command as the
official (C++ core) client fills it, and ``from_proto`` reads one back from a GET_SCHEMA answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum

from ..protocol.PulsarApi_pb2 import KeyValue as KeyValuePb
from ..protocol.PulsarApi_pb2 import Schema as SchemaPb

__all__ = ["SchemaInfo", "SchemaType"]


class SchemaType(IntEnum):
    """Schema types with the official client's numbers (``_pulsar.SchemaType``).

    The non-negative numbers are the wire's ``Schema.Type`` numbers; BYTES and the AUTO types are
    client-side only and never reach the broker. BOOLEAN and the date and time types are not in
    the official Python client; they are here so that a schema a Java producer registered can
    still be read back.
    """

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20
    BYTES = -1
    AUTO_CONSUME = -3
    AUTO_PUBLISH = -4


# The types the official client declares on PRODUCER and SUBSCRIBE; for any other (BYTES above
# all) it sends no schema, and the broker treats the topic as schemaless bytes.
_DECLARED_TYPES = frozenset(
    {SchemaType.STRING, SchemaType.JSON, SchemaType.AVRO, SchemaType.PROTOBUF, SchemaType.PROTOBUF_NATIVE, SchemaType.KEY_VALUE}
)


class SchemaInfo:
    """A schema's declaration: its type, name, definition bytes and string properties.

    The constructor takes the official ``_pulsar.SchemaInfo``'s arguments in its order, plus the
    properties (the official Python client has none; KeyValue schemas need them). ``schema`` may
    be text (a JSON definition) or bytes (a KeyValue schema's binary definition).
    """

    __slots__ = ("_type", "_name", "_data", "_properties")

    def __init__(self, schema_type: SchemaType, name: str, schema: str | bytes, properties: Mapping[str, str] | None = None):
        self._type = SchemaType(schema_type)
        self._name = name
        self._data = schema.encode("utf-8") if isinstance(schema, str) else bytes(schema)
        self._properties = dict(properties or {})

    def schema_type(self) -> SchemaType:
        """The schema's type."""
        return self._type

    def name(self) -> str:
        """The schema's name (``"AVRO"``, ``"JSON"``, ``"KeyValue"``...)."""
        return self._name

    def schema(self) -> str:
        """The definition as text; a binary definition shows undecodable bytes replaced."""
        return self._data.decode("utf-8", "replace")

    def schema_data(self) -> bytes:
        """The definition exactly as it travels on the wire."""
        return self._data

    def properties(self) -> dict[str, str]:
        """The schema's properties (a copy)."""
        return dict(self._properties)

    @property
    def declared_to_broker(self) -> bool:
        """Whether producers and consumers send this schema on PRODUCER and SUBSCRIBE."""
        return self._type in _DECLARED_TYPES

    def to_proto(self) -> SchemaPb:
        """The ``Schema`` protobuf of this declaration, properties sorted by key as the official client
        sends them. A client-side type (BYTES, AUTO) maps to ``None``, as there."""
        return SchemaPb(
            name=self._name,
            schema_data=self._data,
            type=SchemaPb.Type.ValueType(max(int(self._type), 0)),
            properties=[KeyValuePb(key=key, value=self._properties[key]) for key in sorted(self._properties)],
        )

    @classmethod
    def from_proto(cls, proto: SchemaPb) -> SchemaInfo:
        """The declaration a ``Schema`` protobuf carries (from GET_SCHEMA or a broker's registry)."""
        return cls(SchemaType(proto.type), proto.name, proto.schema_data, {kv.key: kv.value for kv in proto.properties})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SchemaInfo):
            return NotImplemented
        return (self._type, self._name, self._data, self._properties) == (other._type, other._name, other._data, other._properties)

    def __hash__(self) -> int:
        return hash((self._type, self._name, self._data))

    def __repr__(self) -> str:
        return f"SchemaInfo({self._type.name}, {self._name!r}, {self.schema()!r}, {self._properties!r})"
