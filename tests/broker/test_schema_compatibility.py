"""The registry's compatibility rules, without a broker.

Avro resolution is checked against fastavro's own: a datum written with the writer schema is read
back with the reader schema, and the rules must call a pair readable exactly when fastavro reads it.
The strategies are then checked on a few schema histories, transitive against latest-only, and
the definitions validated as Pulsar's schema data validators do (PROTOBUF_NATIVE ones by building
their root message from their files).
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import fastavro
import pytest
from google.protobuf import descriptor_pb2, duration_pb2, timestamp_pb2, type_pb2

from airflow_pulsar.broker.schema_avro import AvroSchemaError, parse_avro, read_error
from airflow_pulsar.broker.schema_compatibility import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    SchemaCompatibilityStrategy,
    SchemaData,
    check_compatible,
    validate,
)
from airflow_pulsar.client.schema.info import SchemaType
from airflow_pulsar.client.schema.key_value import pack
from airflow_pulsar.client.schema.protobuf_native import schema_definition


def record(*fields: dict[str, Any], name: str = "Item", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, kind: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
# (writer, reader, a datum of the writer's): both readable and unreadable pairs.
PAIRS: list[tuple[Any, Any, Any]] = [
    ("int", "long", 3),
    ("int", "double", 3),
    ("long", "int", 3),
    ("string", "bytes", "x"),
    ("bytes", "string", b"x"),
    ("float", "int", 1.5),
    ("null", ["null", "string"], None),
    (["null", "string"], "string", "x"),  # fastavro reads it as long as the branch written fits
    (["int", "string"], ["long", "string"], 3),
    (record(field("a", "int")), record(field("a", "long")), {"a": 1}),
    (record(field("a", "int")), record(field("a", "string")), {"a": 1}),
    (record(field("a", "int")), record(field("a", "int"), field("b", "int", default=0)), {"a": 1}),
    (record(field("a", "int")), record(field("a", "int"), field("b", "int")), {"a": 1}),
    (record(field("a", "int"), field("b", "int")), record(field("a", "int")), {"a": 1, "b": 2}),
    (record(field("a", "int")), record(field("z", "int", aliases=["a"])), {"a": 1}),
    (record(field("a", "int")), record(field("a", "int"), name="Other"), {"a": 1}),
    (record(field("c", COLOR)), record(field("c", {**COLOR, "symbols": ["RED", "GREEN", "BLUE"]})), {"c": "GREEN"}),
    (record(field("c", COLOR)), record(field("c", {**COLOR, "symbols": ["RED"]})), {"c": "GREEN"}),
    (record(field("c", COLOR)), record(field("c", {**COLOR, "symbols": ["RED"], "default": "RED"})), {"c": "GREEN"}),
    ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}, [1, 2]),
    ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, {"k": 1}),
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}, b"abcd"),
]


def fastavro_reads(writer: Any, reader: Any, datum: Any) -> bool:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(writer), datum)
    out.seek(0)
    try:
        fastavro.schemaless_reader(out, fastavro.parse_schema(writer), fastavro.parse_schema(reader))
    except Exception:  # fastavro's SchemaResolutionError, or a failure decoding what it could not resolve
        return False
    return True


@pytest.mark.parametrize(("writer", "reader", "datum"), PAIRS, ids=[f"{i}" for i in range(len(PAIRS))])
def test_avro_resolution_agrees_with_fastavro(writer: Any, reader: Any, datum: Any) -> None:
    expected = fastavro_reads(writer, reader, datum)
    error = read_error(parse_avro(json.dumps(reader)), parse_avro(json.dumps(writer)))
    if writer == ["null", "string"]:
        expected = False  # the schema check covers every branch the writer may write, null included
    assert (error is None) == expected, error


def test_a_recursive_record_resolves() -> None:
    node = record(field("value", "int"), field("next", ["null", "Item"], default=None))
    wider = record(field("value", "long"), field("next", ["null", "Item"], default=None))
    assert read_error(parse_avro(json.dumps(wider)), parse_avro(json.dumps(node))) is None
    assert read_error(parse_avro(json.dumps(node)), parse_avro(json.dumps(wider))) is not None


def test_the_reason_names_the_field() -> None:
    reader, writer = record(field("a", "int"), field("b", "int")), record(field("a", "int"))
    error = read_error(parse_avro(json.dumps(reader)), parse_avro(json.dumps(writer)))
    assert error is not None and "'b'" in error and "no default" in error


def avro(*fields: dict[str, Any]) -> SchemaData:
    return SchemaData(SchemaType.AVRO, json.dumps(record(*fields)).encode())


NAME = avro(field("name", "string"))
NAME_INT = avro(field("name", "int"))
NAME_COUNT = avro(field("name", "string"), field("count", "int"))
NAME_COUNT_DEFAULT = avro(field("name", "string"), field("count", "int", default=0))
S = SchemaCompatibilityStrategy


@pytest.mark.parametrize(
    ("strategy", "history", "new", "accepted"),
    [
        (S.BACKWARD, [NAME], NAME_COUNT, False),
        (S.FORWARD, [NAME], NAME_COUNT, True),
        (S.FULL, [NAME], NAME_COUNT_DEFAULT, True),
        (S.FULL, [NAME], NAME_INT, False),
        (S.BACKWARD, [NAME, NAME_COUNT_DEFAULT], NAME_COUNT, True),
        (S.BACKWARD_TRANSITIVE, [NAME, NAME_COUNT_DEFAULT], NAME_COUNT, False),
        (S.FORWARD, [NAME_COUNT, NAME_COUNT_DEFAULT], NAME, True),
        (S.FORWARD_TRANSITIVE, [NAME_COUNT, NAME_COUNT_DEFAULT], NAME, False),
        (S.FULL_TRANSITIVE, [NAME, NAME_COUNT_DEFAULT], NAME_COUNT, False),
        (S.ALWAYS_COMPATIBLE, [NAME], SchemaData(SchemaType.STRING, b""), True),
        (S.ALWAYS_INCOMPATIBLE, [NAME], NAME_COUNT_DEFAULT, False),
        (S.ALWAYS_INCOMPATIBLE, [NAME], NAME, True),  # the latest definition again
        (S.FULL, [NAME], SchemaData(SchemaType.STRING, b""), False),
        (S.ALWAYS_INCOMPATIBLE, [SchemaData(SchemaType.STRING, b"")], SchemaData(SchemaType.STRING, b"x"), False),
        (S.FULL, [SchemaData(SchemaType.STRING, b"")], SchemaData(SchemaType.STRING, b"x"), True),
        (S.FULL, [], NAME_INT, True),
    ],
)
def test_strategies(strategy: SchemaCompatibilityStrategy, history: list[SchemaData], new: SchemaData, accepted: bool) -> None:
    if accepted:
        check_compatible(history, new, strategy)
    else:
        with pytest.raises(IncompatibleSchemaError) as refusal:
            check_compatible(history, new, strategy)
        assert str(refusal.value)


def key_value(key: SchemaData, value: SchemaData) -> SchemaData:
    properties = {
        "key.schema.type": key.schema_type.name,
        "value.schema.type": value.schema_type.name,
        "kv.encoding.type": "INLINE",
    }
    return SchemaData(SchemaType.KEY_VALUE, pack(key.data, value.data), properties)


def test_key_value_schemas_are_checked_side_by_side() -> None:
    text = SchemaData(SchemaType.STRING, b"")
    check_compatible([key_value(text, NAME)], key_value(text, NAME_COUNT_DEFAULT), S.FULL)
    with pytest.raises(IncompatibleSchemaError, match="Error during schema compatibility check"):
        check_compatible([key_value(text, NAME)], key_value(text, NAME_INT), S.FULL)
    with pytest.raises(IncompatibleSchemaError, match="different schema type"):
        check_compatible([key_value(text, NAME)], key_value(NAME, NAME), S.FULL)


def test_json_definitions_are_avro_schemas() -> None:
    old, new = (SchemaData(SchemaType.JSON, s.data) for s in (NAME, NAME_INT))
    with pytest.raises(IncompatibleSchemaError):
        check_compatible([old], new, S.FULL)
    legacy = SchemaData(SchemaType.JSON, b'{"type": "object", "properties": {}}')  # not an Avro schema: replaceable
    check_compatible([legacy], new, S.FULL)


def test_same_definition_ignores_spacing_and_properties() -> None:
    spaced = SchemaData(SchemaType.AVRO, json.dumps(json.loads(NAME.data), indent=4).encode(), {"p": "1"})
    assert spaced.same_definition(NAME)
    assert not NAME.same_definition(SchemaData(SchemaType.JSON, NAME.data))


def test_bad_input_says_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="FULL_TRANSITIVE"):
        SchemaCompatibilityStrategy.parse("FUL")
    with pytest.raises(InvalidSchemaError, match="AVRO"):
        validate(SchemaData(SchemaType.AVRO, b"not json"))
    with pytest.raises(AvroSchemaError):
        parse_avro(b'{"type": "record", "name": "X", "fields": [{"name": "a", "type": "int", "default": "x"}]}')


def protobuf_native(message: Any, **changes: str) -> SchemaData:
    """The PROTOBUF_NATIVE definition the clients declare for ``message``, with ``changes`` made to it."""
    return SchemaData(SchemaType.PROTOBUF_NATIVE, json.dumps({**schema_definition(message.DESCRIPTOR), **changes}).encode())


def file_set(*files: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.b64encode(descriptor_pb2.FileDescriptorSet(file=files).SerializeToString()).decode()


def file_of(message: Any) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    message.DESCRIPTOR.file.CopyToProto(proto)
    return proto


def timestamp_with_a_new_field() -> SchemaData:
    proto = file_of(timestamp_pb2.Timestamp)
    proto.message_type[0].field.add(name="zone", number=9, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    return protobuf_native(timestamp_pb2.Timestamp, fileDescriptorSet=file_set(proto))


TIMESTAMP, DURATION = protobuf_native(timestamp_pb2.Timestamp), protobuf_native(duration_pb2.Duration)


def test_a_protobuf_native_schema_keeps_its_root_message() -> None:
    """As Pulsar's default check: under BACKWARD, FORWARD and FULL the root message's full name
    may not change, and nothing else is compared."""
    changed = timestamp_with_a_new_field()
    for strategy in (S.BACKWARD, S.FORWARD_TRANSITIVE, S.FULL):
        check_compatible([TIMESTAMP], changed, strategy)
        with pytest.raises(IncompatibleSchemaError, match=f"root message change is not allowed under the '{strategy.value}' strategy. "
                           "Original message name: 'google.protobuf.Timestamp', new message name: 'google.protobuf.Duration'"):
            check_compatible([TIMESTAMP], DURATION, strategy)
    check_compatible([TIMESTAMP], DURATION, S.ALWAYS_COMPATIBLE)
    with pytest.raises(IncompatibleSchemaError, match="ALWAYS_INCOMPATIBLE"):
        check_compatible([TIMESTAMP], changed, S.ALWAYS_INCOMPATIBLE)
    check_compatible([DURATION, TIMESTAMP], changed, S.FULL)
    with pytest.raises(IncompatibleSchemaError, match="Original message name: 'google.protobuf.Duration'"):
        check_compatible([DURATION, TIMESTAMP], changed, S.FULL_TRANSITIVE)


def protobuf_files(message: Any) -> list[descriptor_pb2.FileDescriptorProto]:
    document = json.loads(protobuf_native(message).data)
    return list(descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(document["fileDescriptorSet"])).file)


def test_valid_definitions_pass() -> None:
    for schema in (
        TIMESTAMP,
        protobuf_native(type_pb2.Type),  # a file with imports
        # Imports after the file importing them: the set's order does not matter.
        protobuf_native(type_pb2.Type, fileDescriptorSet=file_set(*reversed(protobuf_files(type_pb2.Type)))),
        SchemaData(SchemaType.JSON, NAME.data),
        SchemaData(SchemaType.JSON, b'{"type": "object", "properties": {}}'),  # an early JSON-schema definition
        SchemaData(SchemaType.STRING, b""),
        SchemaData(SchemaType.STRING, b"null"),  # what the official Python client declares
        SchemaData(SchemaType.INT64, b""),
        key_value(SchemaData(SchemaType.STRING, b""), NAME),
    ):
        validate(schema)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        (SchemaData(SchemaType.PROTOBUF_NATIVE, b"not json"), "deserialize ProtobufNative Schema failed"),
        (SchemaData(SchemaType.PROTOBUF_NATIVE, b"[]"), "not a JSON object"),
        (protobuf_native(timestamp_pb2.Timestamp, fileDescriptorSet="!!!"), "deserialize ProtobufNative Schema failed"),
        (protobuf_native(timestamp_pb2.Timestamp, rootMessageTypeName="google.protobuf.Nope"), "google.protobuf.Nope"),
        (protobuf_native(timestamp_pb2.Timestamp, rootFileDescriptorName="other.proto"), "no file 'other.proto'"),
        (protobuf_native(type_pb2.Type, fileDescriptorSet=file_set(file_of(type_pb2.Type))), "is not in the file descriptor set"),
        (SchemaData(SchemaType.AVRO, b'["null", "string"]'), r"\[UNION\] is not supported"),
        (SchemaData(SchemaType.JSON, b"[1]"), "Invalid schema definition data for JSON schema"),
        (SchemaData(SchemaType.STRING, b"abc"), "Invalid schema definition data for string schema : 'abc'"),
        (SchemaData(SchemaType.INT32, b"x"), "length of schema data should be zero, but 1 bytes is found"),
        (key_value(SchemaData(SchemaType.STRING, b'"abc"'), NAME), "string schema"),
    ],
    ids=[
        "not-json", "not-an-object", "bad-base64", "no-root-message", "no-root-file", "missing-import",
        "avro-union", "json-array", "string", "int32", "kv-side",
    ],
)
def test_invalid_definitions_are_refused_as_pulsar_refuses_them(schema: SchemaData, reason: str) -> None:
    with pytest.raises(InvalidSchemaError, match=reason):
        validate(schema)
