"""Schemas against the official ``pulsar.schema`` as oracle: declarations, payload bytes, cross-decoding.

The same record is declared in both modules; the official schema's declaration (type number, name,
definition text) and payload must equal ours byte for byte, and each client must read what the
other wrote. KeyValue (absent from the official Python client) is checked against Pulsar's wire
form, built by hand here, around payloads the official schemas produce.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import struct
from enum import Enum
from types import ModuleType
from typing import Any

import _pulsar
import pulsar.schema as official
import pytest
from fastavro.schema import SchemaParseException, UnknownType
from google.protobuf import descriptor_pb2, timestamp_pb2, type_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

import airflow_pulsar.client.schema as ours
from airflow_pulsar.client.protocol import PulsarApi_pb2 as pb
from airflow_pulsar.client.schema import KeyValue, KeyValueEncodingType, KeyValueSchema, SchemaInfo, SchemaType


class Color(Enum):
    RED = 1
    GREEN = 2


def order_records(m: ModuleType) -> type:
    """A record using every field type, nested records, containers of records and an enum."""

    class Line(m.Record):
        _avro_namespace = "shop"
        sku = m.String(required=True)
        quantity = m.Integer(default=1, required_default=True)

    class Order(m.Record):
        _avro_namespace = "shop"
        id = m.Long(required=True)
        customer = m.String()
        total = m.Double()
        discount = m.Float()
        paid = m.Boolean()
        blob = m.Bytes()
        color = m.CustomEnum(Color, default=Color.RED, required_default=True)
        tags = m.Array(m.String())
        counts = m.Map(m.Integer())
        first = Line()
        lines = m.Array(Line())
        by_sku = m.Map(Line())

    return Order


OFFICIAL_ORDER, OUR_ORDER = order_records(official), order_records(ours)

# A nested record field defaults to its template, whose required fields are None: like the official
# client, decoding that fails, so every value sets ``first``.
ORDER_VALUES: list[dict[str, Any]] = [
    {"id": 1, "first": {"sku": "s0"}},
    {
        "id": -(2**62),
        "customer": "Zoë",
        "total": 12.25,
        "discount": 0.5,
        "paid": True,
        "blob": b"raw",
        "color": Color.GREEN,
        "tags": ["a", "b"],
        "counts": {"x": 1, "y": -2},
        "first": {"sku": "s1"},
        "lines": [{"sku": "s2", "quantity": 3}, {"sku": "s3"}],
        "by_sku": {"s4": {"sku": "s4", "quantity": 4}},
    },
]

SCHEMA_CLASSES = [("JsonSchema", SchemaType.JSON), ("AvroSchema", SchemaType.AVRO)]


def schema_pair(name: str) -> tuple[Any, Any]:
    return getattr(official, name)(OFFICIAL_ORDER), getattr(ours, name)(OUR_ORDER)


def test_schema_type_numbers_are_the_official_ones() -> None:
    for name, member in _pulsar.SchemaType.__members__.items():
        assert SchemaType[name] == int(member), name


@pytest.mark.parametrize(("name", "schema_type"), SCHEMA_CLASSES)
def test_record_schema_declares_what_the_official_declares(name: str, schema_type: SchemaType) -> None:
    theirs, mine = schema_pair(name)
    assert int(theirs.schema_info().schema_type()) == mine.schema_info().schema_type() == schema_type
    assert theirs.schema_info().name() == mine.schema_info().name() == schema_type.name
    assert mine.schema_info().schema() == theirs.schema_info().schema()
    assert mine.schema_info().schema_data() == theirs.schema_info().schema().encode()
    assert json.loads(mine.schema_info().schema()) == OUR_ORDER.schema()


@pytest.mark.parametrize(("name", "schema_type"), SCHEMA_CLASSES)
@pytest.mark.parametrize("values", ORDER_VALUES, ids=["minimal", "full"])
def test_record_payloads_are_byte_identical_and_read_both_ways(name: str, schema_type: SchemaType, values: dict[str, Any]) -> None:
    theirs, mine = schema_pair(name)
    their_record, our_record = OFFICIAL_ORDER(**values), OUR_ORDER(**values)
    payload = mine.encode(our_record)
    assert payload == theirs.encode(their_record)
    assert mine.decode(payload) == our_record
    assert theirs.decode(payload) == their_record
    assert mine.decode(theirs.encode(their_record)) == our_record


record_values = st.fixed_dictionaries(
    {"id": st.integers(-(2**63), 2**63 - 1), "first": st.fixed_dictionaries({"sku": st.text()})},
    optional={
        "customer": st.text(),
        "total": st.floats(allow_nan=False),
        "paid": st.booleans(),
        "blob": st.binary().filter(lambda b: _is_utf8(b)),
        "color": st.sampled_from(Color),
        "tags": st.lists(st.text(), max_size=3),
        "counts": st.dictionaries(st.text(), st.integers(-(2**31), 2**31 - 1), max_size=3),
        "lines": st.lists(st.fixed_dictionaries({"sku": st.text(), "quantity": st.integers(-(2**31), 2**31 - 1)}), max_size=3),
    },
)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=150, deadline=None)
@given(record_values)
def test_any_record_encodes_as_the_official_encodes_it(values: dict[str, Any]) -> None:
    for name, _ in SCHEMA_CLASSES:
        theirs, mine = schema_pair(name)
        payload = mine.encode(OUR_ORDER(**values))
        assert payload == theirs.encode(OFFICIAL_ORDER(**values))
        assert theirs.decode(payload) == OFFICIAL_ORDER(**values)
        assert mine.decode(payload) == OUR_ORDER(**values)


@pytest.mark.parametrize("name", ["JsonSchema", "AvroSchema"])
def test_encoding_another_type_raises_type_error_as_the_official(name: str) -> None:
    theirs, mine = schema_pair(name)
    with pytest.raises(TypeError):
        theirs.encode({"id": 1})
    with pytest.raises(TypeError, match="Order"):
        mine.encode({"id": 1})


@pytest.mark.parametrize("name", ["JsonSchema", "AvroSchema"])
def test_a_class_that_is_not_a_record_is_refused(name: str) -> None:
    with pytest.raises(TypeError, match="record_cls"):
        getattr(ours, name)(dict)


def test_json_payload_layout() -> None:
    payload = ours.JsonSchema(OUR_ORDER).encode(OUR_ORDER(id=5, color=Color.GREEN, blob=b"hi", first={"sku": "a"}))
    document = json.loads(payload)
    assert payload.startswith(b'{\n "id": 5,\n "customer": null,')
    assert document["color"] == 2 and document["blob"] == "hi" and document["first"] == {"sku": "a", "quantity": 1}


AVRO_DEFINITION = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "sensor", "type": "string"}, {"name": "value", "type": ["null", "double"]}],
}


def test_avro_given_a_definition_encodes_dicts_as_the_official() -> None:
    theirs, mine = official.AvroSchema(None, schema_definition=AVRO_DEFINITION), ours.AvroSchema(None, AVRO_DEFINITION)
    datum = {"sensor": "t1", "value": 21.5}
    assert mine.schema_info().schema() == theirs.schema_info().schema()
    assert mine.encode(datum) == theirs.encode(datum)
    assert mine.decode(theirs.encode(datum)) == datum == theirs.decode(mine.encode(datum))
    with pytest.raises(ValueError):
        theirs.encode(5)
    with pytest.raises(ValueError, match="dict"):
        mine.encode(5)


def test_avro_encode_dict_gives_what_fastavro_writes() -> None:
    line_cls = type(OUR_ORDER.__dict__["first"])
    values = {"color": Color.GREEN, "first": line_cls(sku="s"), "lines": [line_cls(sku="t")], "counts": {"a": 1}}
    assert ours.AvroSchema(OUR_ORDER).encode_dict(values) == {
        "color": "GREEN",
        "first": {"sku": "s", "quantity": 1},
        "lines": [{"sku": "t", "quantity": 1}],
        "counts": {"a": 1},
    }


def test_avro_without_record_or_definition_raises_value_error() -> None:
    with pytest.raises(AssertionError):  # the official's choice; ours is a ValueError naming both
        official.AvroSchema(None)
    with pytest.raises(ValueError, match="record_cls or a schema_definition"):
        ours.AvroSchema(None, None)


def test_an_invalid_avro_definition_is_refused_at_construction() -> None:
    with pytest.raises(UnknownType):
        ours.AvroSchema(None, {"type": "record", "name": "Bad", "fields": [{"name": "x", "type": "no-such-type"}]})
    with pytest.raises(SchemaParseException):
        ours.AvroSchema(None, {"type": "record", "name": "Bad", "fields": [{"name": "x"}]})


def test_bytes_and_string_schemas_match_the_official() -> None:
    for theirs, mine, value in (
        (official.BytesSchema(), ours.BytesSchema(), b"\x00\xff"),
        (official.StringSchema(), ours.StringSchema(), "Zoë"),
    ):
        their_info, our_info = theirs.schema_info(), mine.schema_info()
        assert (int(their_info.schema_type()), their_info.name(), their_info.schema()) == (
            our_info.schema_type(),
            our_info.name(),
            our_info.schema(),
        )
        assert mine.encode(value) == theirs.encode(value)
        assert mine.decode(theirs.encode(value)) == value
        assert str(mine) == str(theirs)
        with pytest.raises(TypeError):
            theirs.encode(5)
        with pytest.raises(TypeError):
            mine.encode(5)


def test_protobuf_native_declares_and_encodes_as_the_official() -> None:
    # type.proto imports any.proto and source_context.proto: the descriptor set holds all three.
    theirs, mine = official.ProtobufNativeSchema(type_pb2.Type), ours.ProtobufNativeSchema(type_pb2.Type)
    their_info, our_info = theirs.schema_info(), mine.schema_info()
    assert (int(their_info.schema_type()), their_info.name()) == (our_info.schema_type(), our_info.name()) == (20, "PROTOBUF_NATIVE")
    assert our_info.schema() == their_info.schema()
    definition = json.loads(our_info.schema())
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(definition["fileDescriptorSet"])).file
    assert [f.name for f in files][-1] == "google/protobuf/type.proto" and len(files) == 3
    message = type_pb2.Type(name="t", oneofs=["a"])
    assert mine.encode(message) == theirs.encode(message)
    assert mine.decode(theirs.encode(message)) == message
    assert str(mine) == str(theirs) == "ProtobufNativeSchema(Type)"
    for schema in (theirs, mine):
        with pytest.raises(TypeError):
            schema.encode(timestamp_pb2.Timestamp())
    for module in (official, ours):
        with pytest.raises(TypeError):
            module.ProtobufNativeSchema(int)


def _length(n: int) -> bytes:
    return struct.pack(">i", n)


def test_key_value_inline_payload_is_pulsar_length_prefixed_pair() -> None:
    key_schema, value_schema = official.StringSchema(), official.JsonSchema(OFFICIAL_ORDER)
    schema = KeyValueSchema(ours.StringSchema(), ours.JsonSchema(OUR_ORDER))
    ours_value, their_value = OUR_ORDER(id=3, first={"sku": "a"}), OFFICIAL_ORDER(id=3, first={"sku": "a"})
    key_bytes, value_bytes = key_schema.encode("k1"), value_schema.encode(their_value)
    expected = _length(len(key_bytes)) + key_bytes + _length(len(value_bytes)) + value_bytes
    assert schema.encode(KeyValue("k1", ours_value)) == expected
    assert schema.encode(("k1", ours_value)) == expected
    assert schema.decode(expected) == KeyValue("k1", ours_value)
    key, value = schema.decode(expected)
    assert key == "k1" and value == ours_value


def test_key_value_none_sides_are_minus_one_lengths() -> None:
    schema = KeyValueSchema(ours.StringSchema(), ours.StringSchema())
    assert schema.encode(KeyValue(None, "v")) == _length(-1) + _length(1) + b"v"
    assert schema.encode(KeyValue("", None)) == _length(0) + _length(-1)
    assert schema.decode(_length(-1) + _length(-1)) == KeyValue(None, None)
    assert schema.decode(_length(0) + _length(0)) == KeyValue("", "")


@pytest.mark.parametrize("data", [b"", b"\x00\x00", _length(5) + b"abc", _length(1) + b"a", _length(-7) + _length(0)])
def test_key_value_truncated_or_corrupt_data_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        KeyValueSchema(ours.BytesSchema(), ours.BytesSchema()).decode(data)


def test_key_value_refuses_what_is_not_a_pair() -> None:
    schema = KeyValueSchema(ours.StringSchema(), ours.StringSchema())
    with pytest.raises(TypeError):
        schema.encode("kv")
    with pytest.raises(TypeError):
        schema.encode(("k", "v", "w"))
    with pytest.raises(TypeError):
        schema.encode(("k", 5))
    with pytest.raises(TypeError, match="key_schema"):
        KeyValueSchema(str, ours.StringSchema())
    with pytest.raises(ValueError, match="encoding"):
        KeyValueSchema(ours.StringSchema(), ours.StringSchema(), 7)


def test_key_value_declaration_packs_both_definitions_and_names_them() -> None:
    avro = ours.AvroSchema(OUR_ORDER)
    info = KeyValueSchema(ours.StringSchema(), avro, KeyValueEncodingType.SEPARATED).schema_info()
    assert (info.schema_type(), info.name()) == (SchemaType.KEY_VALUE, "KeyValue")
    key_definition, value_definition = b"null", avro.schema_info().schema_data()
    assert info.schema_data() == _length(4) + key_definition + _length(len(value_definition)) + value_definition
    assert info.properties() == {
        "key.schema.name": "STRING",
        "key.schema.type": "STRING",
        "key.schema.properties": "{}",
        "value.schema.name": "AVRO",
        "value.schema.type": "AVRO",
        "value.schema.properties": "{}",
        "kv.encoding.type": "SEPARATED",
    }
    assert info.declared_to_broker


class FakeMessage:
    """A received message as schemas read it."""

    def __init__(self, data: bytes, key: bytes | None = None, version: str = "", null_value: bool = False, topic: str = "t"):
        self._data, self._key, self._version, self._null, self._topic = data, key, version, null_value, topic

    def data(self) -> bytes:
        return self._data

    def topic_name(self) -> str:
        return self._topic

    def schema_version(self) -> str:
        return self._version

    def key_bytes(self) -> bytes | None:
        return self._key

    def has_null_value(self) -> bool:
        return self._null


def test_key_value_separated_keeps_the_key_out_of_the_payload() -> None:
    schema = KeyValueSchema(ours.JsonSchema(OUR_ORDER), ours.AvroSchema(OUR_ORDER), KeyValueEncodingType.SEPARATED)
    key, value = OUR_ORDER(id=1, first={"sku": "a"}), OUR_ORDER(id=2, customer="c", first={"sku": "a"})
    parts = schema.encode_parts(KeyValue(key, value))
    assert parts.key == official.JsonSchema(OFFICIAL_ORDER).encode(OFFICIAL_ORDER(id=1, first={"sku": "a"}))
    assert parts.value == official.AvroSchema(OFFICIAL_ORDER).encode(OFFICIAL_ORDER(id=2, customer="c", first={"sku": "a"}))
    assert schema.encode(KeyValue(key, value)) == parts.value
    assert schema.decode_message(FakeMessage(parts.value, key=parts.key)) == KeyValue(key, value)
    assert schema.decode_message(FakeMessage(b"", key=parts.key, null_value=True)) == KeyValue(key, None)
    assert schema.encode_parts(KeyValue(None, None)) == (None, None) and schema.encode(KeyValue(key, None)) == b""
    with pytest.raises(ValueError, match="SEPARATED"):
        schema.decode(parts.value)


def test_key_value_inline_decodes_messages_from_the_payload_alone() -> None:
    schema = KeyValueSchema(ours.StringSchema(), ours.StringSchema())
    assert schema.decode_message(FakeMessage(schema.encode(("k", "v")), key=b"ignored")) == KeyValue("k", "v")
    assert str(schema) == "KeyValueSchema(StringSchema, StringSchema, INLINE)"


def test_schema_info_builds_the_command_schema_and_reads_it_back() -> None:
    info = KeyValueSchema(ours.StringSchema(), ours.JsonSchema(OUR_ORDER)).schema_info()
    proto = pb.Schema.FromString(info.to_proto().SerializeToString())
    assert (proto.type, proto.name, proto.schema_data) == (pb.Schema.KeyValue, "KeyValue", info.schema_data())
    assert [kv.key for kv in proto.properties] == sorted(info.properties())
    assert SchemaInfo.from_proto(proto) == info
    avro = ours.AvroSchema(OUR_ORDER).schema_info().to_proto()
    assert (avro.type, avro.name, avro.schema_data, list(avro.properties)) == (
        pb.Schema.Avro,
        "AVRO",
        official.AvroSchema(OFFICIAL_ORDER).schema_info().schema().encode(),
        [],
    )


def test_only_the_types_the_official_client_sends_are_declared_to_the_broker() -> None:
    assert not ours.BytesSchema().schema_info().declared_to_broker
    assert ours.BytesSchema().schema_info().to_proto().type == pb.Schema.Type.Value("None")
    for schema in (ours.StringSchema(), ours.JsonSchema(OUR_ORDER), ours.AvroSchema(OUR_ORDER), ours.ProtobufNativeSchema(type_pb2.Type)):
        assert schema.schema_info().declared_to_broker, schema
        assert schema.schema_info().to_proto().type == schema.schema_info().schema_type()


class Registry:
    """The client, as a schema asks it for writer schemas: answers from a dict, counting calls."""

    def __init__(self, schemas: dict[int, SchemaInfo]):
        self.schemas = schemas
        self.calls: list[tuple[str, int]] = []

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        self.calls.append((topic, version))
        return self.schemas[version]


def _version(n: int) -> str:
    return struct.pack(">q", n).decode("latin-1")  # as Message.schema_version() gives it


def test_avro_reads_a_message_with_the_schema_version_it_was_written_with() -> None:
    class Old(ours.Record):
        id = ours.Long(required=True)

    class New(ours.Record):  # named differently, and with a field added with a default: compatible
        id = ours.Long(required=True)
        note = ours.String(default="none", required=True, required_default=True)

    old_writer = ours.AvroSchema(Old)
    registry = Registry({0: old_writer.schema_info()})
    reader = ours.AvroSchema(New)
    reader.attach_client(registry)
    message = FakeMessage(old_writer.encode(Old(id=7)), version=_version(0))
    assert reader.decode_message(message) == New(id=7, note="none")
    assert reader.decode_message(message) == New(id=7, note="none")
    assert registry.calls == [("t", 0)]  # fetched once, then cached
    with pytest.raises(EOFError):  # what resolving spares: read with its own schema, the payload is short
        reader.decode(message.data())


def test_avro_falls_back_to_its_own_schema_when_the_writer_schema_cannot_be_had(caplog: pytest.LogCaptureFixture) -> None:
    payload = ours.AvroSchema(OUR_ORDER).encode(OUR_ORDER(id=1, first={"sku": "a"}))
    reader = ours.AvroSchema(OUR_ORDER)
    assert reader.decode_message(FakeMessage(payload, version=_version(3))) == OUR_ORDER(id=1, first={"sku": "a"})  # no client attached
    reader.attach_client(Registry({0: ours.StringSchema().schema_info()}))
    with caplog.at_level(logging.WARNING):
        assert reader.decode_message(FakeMessage(payload, version=_version(0))) == OUR_ORDER(id=1, first={"sku": "a"})  # not AVRO
        assert reader.decode_message(FakeMessage(payload, version=_version(1))) == OUR_ORDER(id=1, first={"sku": "a"})  # unknown version
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_other_schemas_decode_messages_from_their_payload() -> None:
    payload = official.JsonSchema(OFFICIAL_ORDER).encode(OFFICIAL_ORDER(id=4, first={"sku": "a"}))
    assert ours.JsonSchema(OUR_ORDER).decode_message(FakeMessage(payload)) == OUR_ORDER(id=4, first={"sku": "a"})
    assert ours.StringSchema().decode_message(FakeMessage(b"abc")) == "abc"


def test_every_official_class_and_method_exists_with_its_parameters() -> None:
    # Ours may add parameters after the official ones (Schema's properties), never change or drop one.
    differences = []
    for name in sorted(n for n in dir(official) if not n.startswith("_") and n[0].isupper()):
        theirs, mine = getattr(official, name), getattr(ours, name, None)
        methods = {"__init__"} | {a for a in dir(theirs) if not a.startswith("_") and callable(getattr(theirs, a))}
        for method in sorted(methods):
            their_params = [(p.name, p.default) for p in inspect.signature(getattr(theirs, method)).parameters.values()]
            our_method = getattr(mine, method, None)
            our_params = [] if our_method is None else [(p.name, p.default) for p in inspect.signature(our_method).parameters.values()]
            if our_params[: len(their_params)] != their_params:
                differences.append((name, method, their_params, our_params))
    assert differences == []
