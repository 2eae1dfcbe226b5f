"""Schema: how the values a producer sends become bytes, and received bytes values again.

A schema encodes and decodes values and declares itself to the broker through its
:class:`~.info.SchemaInfo`. A consumer's schema decodes a received message through
:meth:`Schema.decode_message`, which may consult the client (attached with
:meth:`Schema.attach_client`) for the schema the message was written with.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar

from .info import SchemaInfo, SchemaType

__all__ = ["EncodedMessage", "Schema", "SchemaSource", "schema_version_number"]

T = TypeVar("T")


class EncodedMessage(Protocol):
    """A received message, as a schema decoding it reads it."""

    def data(self) -> bytes:
        """The payload."""
        ...

    def topic_name(self) -> str:
        """The topic (partition) it came from."""
        ...

    def schema_version(self) -> str:
        """The version of the schema it was written with (the broker's 8 big-endian bytes, one character
        each, as the official client returns them), or an empty string."""
        ...

    def key_bytes(self) -> bytes | None:
        """The message key as bytes (base64-decoded if the producer sent it so), or None."""
        ...

    def has_null_value(self) -> bool:
        """Whether the producer sent no value."""
        ...


class SchemaSource(Protocol):
    """The client, as a schema asks it for the schema a topic registered under a version."""

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo: ...


def schema_version_number(version: str) -> int:
    """A schema version (``Message.schema_version()``) as a number (the broker sends a big-endian 64-bit
    integer); -1 for none."""
    return int.from_bytes(version.encode("latin-1"), "big", signed=True) if version else -1


class Schema(ABC, Generic[T]):
    """Base of the schemas: ``encode(value) -> bytes``, ``decode(bytes) -> value`` and the declaration.

    The constructor takes the official ``pulsar.schema.Schema``'s arguments: the Python type of the
    values (checked by ``encode``; None checks nothing), the schema type, the definition and the
    schema name, plus the declaration's properties. A definition is serialized as JSON with the
    official client's layout (indented by one space), so both declare byte-identical definitions;
    bytes are a binary definition, taken as they are.
    """

    def __init__(
        self,
        record_cls: type[T] | None,
        schema_type: SchemaType,
        schema_definition: object,
        schema_name: str,
        properties: Mapping[str, str] | None = None,
    ):
        self._record_cls = record_cls
        data = schema_definition if isinstance(schema_definition, bytes) else json.dumps(schema_definition, indent=True)
        self._schema_info = SchemaInfo(schema_type, schema_name, data, properties)
        self._client: SchemaSource | None = None

    @abstractmethod
    def encode(self, obj: T) -> bytes:
        """The bytes a producer sends for ``obj``."""

    @abstractmethod
    def decode(self, data: bytes) -> T:
        """The value ``data`` encodes."""

    def decode_message(self, msg: EncodedMessage) -> T:
        """The value of a received message."""
        return self.decode(msg.data())

    def schema_info(self) -> SchemaInfo:
        """What this schema declares to the broker."""
        return self._schema_info

    def attach_client(self, client: SchemaSource) -> None:
        """Let :meth:`decode_message` ask ``client`` for the schema a message was written with."""
        self._client = client

    def _validate_object_type(self, obj: object) -> None:
        if self._record_cls is not None and not isinstance(obj, self._record_cls):
            raise TypeError(f"{type(self).__name__} encodes {self._record_cls.__name__} values, not {type(obj).__name__}: {obj!r}")
