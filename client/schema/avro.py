"""AvroSchema: records (or plain dicts) as Avro binary, through ``fastavro``.

The payload is a single datum without a container header, as the official client writes it, so
either client reads the other's messages. Given the client (``attach_client``, which consumers
do), decoding a message reads it with the schema version it was written with and resolves that
to this schema, so a consumer reads messages of an older or newer compatible schema.

``fastavro`` (some 10 ms to import) loads with the first AvroSchema, not with the client.
"""

from __future__ import annotations

import copy
import io
import json
import logging
from enum import Enum
from typing import Any, TypeVar, overload

from .base import EncodedMessage, Schema, SchemaSource, schema_version_number
from .info import SchemaType
from .record import Record, field_values, require_record_class

__all__ = ["AvroSchema"]

logger = logging.getLogger(__name__)

R = TypeVar("R", bound=Record)
# A record instance, or the plain dict of a schema given as a definition.
T = TypeVar("T", bound=Record | dict[str, Any])


def _avro_value(value: Any) -> Any:
    """``value`` as fastavro writes it: records as dicts, enums by name."""
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, Record):
        value = field_values(value)
    if isinstance(value, list):
        return [_avro_value(item) for item in value]
    if isinstance(value, dict):
        return {key: _avro_value(item) for key, item in value.items()}
    return value


def _parse(definition: dict[str, Any]) -> Any:
    """fastavro's parsed form of ``definition``; a field without a type is a SchemaParseException
    in every fastavro version (before 1.13 it was a bare KeyError)."""
    import fastavro
    from fastavro.schema import SchemaParseException

    try:
        return fastavro.parse_schema(copy.deepcopy(definition))
    except KeyError as missing:
        raise SchemaParseException(f"invalid Avro schema: a definition lacks its {missing} key") from None


class AvroSchema(Schema[T]):
    """Avro for instances of ``record_cls``, or for dicts when only ``schema_definition`` is given.

    The definition is parsed once, here, so an invalid one raises fastavro's error
    (``fastavro.schema.SchemaParseException``, or ``UnknownType`` for an undefined type name) at
    construction; the official client raises it at the first encode or decode.
    """

    @overload
    def __init__(self: AvroSchema[R], record_cls: type[R], schema_definition: None = None) -> None: ...

    @overload
    def __init__(self: AvroSchema[dict[str, Any]], record_cls: None, schema_definition: dict[str, Any]) -> None: ...

    def __init__(self, record_cls: type[Any] | None, schema_definition: dict[str, Any] | None = None):
        if record_cls is not None:
            require_record_class(record_cls)
            definition = record_cls.schema()
        elif schema_definition is not None:
            definition = schema_definition
        else:
            raise ValueError("AvroSchema needs a record_cls or a schema_definition; both are None")
        super().__init__(record_cls, SchemaType.AVRO, definition, "AVRO")
        self._definition = definition
        self._parsed = _parse(definition)
        # Writer schemas by (topic, schema version), parsed and named as this schema.
        self._writer_schemas: dict[tuple[str, int], Any] = {}

    def encode(self, obj: T) -> bytes:
        if self._record_cls is not None:
            self._validate_object_type(obj)
            datum = _avro_value(obj)
        elif isinstance(obj, dict):
            datum = obj
        else:
            raise ValueError(f"An AvroSchema given by its definition encodes dicts, not {type(obj).__name__}")
        import fastavro  # loaded by the constructor already: a lookup in sys.modules

        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, self._parsed, datum)
        return buffer.getvalue()

    def encode_dict(self, d: dict[str, Any]) -> dict[str, Any]:
        """``d`` with its records turned into dicts and its enums into their names, as fastavro writes them."""
        return {key: _avro_value(value) for key, value in d.items()}

    def decode(self, data: bytes) -> T:
        return self._read(data, self._parsed)

    def decode_message(self, msg: EncodedMessage) -> T:
        """The message's value, read with the schema version it was written with when the client is
        attached and can name it, else (logged) with this schema."""
        version = schema_version_number(msg.schema_version())
        client = self._client
        if client is None or version < 0:
            return self.decode(msg.data())
        topic = msg.topic_name()
        try:
            return self._read(msg.data(), self._writer_schema(client, topic, version))
        except Exception as error:  # any failure to fetch or resolve: the official client falls back too
            logger.warning("Cannot decode a message of %s with its schema version %d (%s); using the consumer's", topic, version, error)
            return self.decode(msg.data())

    def _writer_schema(self, client: SchemaSource, topic: str, version: int) -> Any:
        parsed = self._writer_schemas.get((topic, version))
        if parsed is None:
            logger.info("Fetching the schema of %s version %d", topic, version)
            info = client.get_schema_info(topic, version)
            if info.schema_type() != SchemaType.AVRO:
                raise RuntimeError(f"The schema of {topic} version {version} is {info.schema_type().name}, not AVRO")
            writer = json.loads(info.schema())
            # Resolution matches records by name; the writer's may differ from ours and still be compatible.
            if "name" in self._definition:
                writer["name"] = self._definition["name"]
            parsed = self._writer_schemas[(topic, version)] = _parse(writer)
        return parsed

    def _read(self, data: bytes, writer_schema: Any) -> Any:
        import fastavro  # loaded by the constructor already: a lookup in sys.modules

        datum = fastavro.schemaless_reader(io.BytesIO(data), writer_schema, self._parsed)
        if self._record_cls is None:
            return datum
        assert isinstance(datum, dict)  # a record class's schema is a record: its datum is a dict
        return self._record_cls(**datum)
