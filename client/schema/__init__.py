"""Schemas: typed message values, as the official ``pulsar.schema`` module offers them.

Switching is one import, ``from airflow_pulsar.client.schema import AvroSchema, Record, String``.
Records, their JSON and Avro schemas and their payloads are byte-identical to the official
client's, so producers and consumers of either client share topics. Beyond the official module:
:class:`KeyValueSchema` (Pulsar's INLINE and SEPARATED key/value encodings),
:class:`SchemaInfo`/:class:`SchemaType`, the declaration a schema sends to the broker,
:class:`SchemaSource`, what asks the broker for a topic's schemas, and
:func:`schema_version_number`, a message's ``schema_version()`` as a number.
"""

from __future__ import annotations

from .avro import AvroSchema
from .base import EncodedMessage, Schema, SchemaSource, schema_version_number
from .fields import Array, Boolean, Bytes, CustomEnum, Double, Field, Float, Integer, Long, Map, Null, String
from .info import SchemaInfo, SchemaType
from .json_schema import JsonSchema
from .key_value import EncodedKeyValue, KeyValue, KeyValueEncodingType, KeyValueSchema
from .primitive import BytesSchema, StringSchema
from .protobuf_native import ProtobufNativeSchema
from .record import Record

__all__ = [
    "Array",
    "AvroSchema",
    "Boolean",
    "Bytes",
    "BytesSchema",
    "CustomEnum",
    "Double",
    "EncodedKeyValue",
    "EncodedMessage",
    "Field",
    "Float",
    "Integer",
    "JsonSchema",
    "KeyValue",
    "KeyValueEncodingType",
    "KeyValueSchema",
    "Long",
    "Map",
    "Null",
    "ProtobufNativeSchema",
    "Record",
    "Schema",
    "SchemaInfo",
    "SchemaSource",
    "SchemaType",
    "String",
    "StringSchema",
    "schema_version_number",
]
