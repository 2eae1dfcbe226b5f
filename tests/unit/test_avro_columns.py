"""Typed columns from a topic's schema: Avro types as Spark columns, Avro values decoded into them
many at a time (fastavro's per-message reader is the oracle), older versions resolved to the
newest, and values that are not datums kept as corrupt records."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import random
from typing import Any

import fastavro
import pulsar
import pyarrow as pa
import pytest

import airflow_pulsar.client.schema as ours
from airflow_pulsar.spark.job.avro_decode import decode_datums
from airflow_pulsar.spark.job.avro_types import parse_definition, value_ddl, value_struct
from airflow_pulsar.spark.job.columns import CORRUPT_RECORD
from airflow_pulsar.spark.job.registry_values import AvroValues, RegistryJsonValues
from airflow_pulsar.spark.job.source import arrow_schema
from airflow_pulsar.spark.job.topic_schema import TopicSchema

ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "qty", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "address", "type": ADDRESS},
        {"name": "previous", "type": ["null", "Address"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
        {"name": "either", "type": ["null", "int", "string"]},
        {"name": "wide", "type": ["int", "long"]},
        {
            "name": "lines",
            "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}]}},
        },
    ],
}
EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def test_avro_types_become_spark_columns() -> None:
    assert value_ddl(parse_definition(json.dumps(ORDER))) == (
        "`id` BIGINT, `name` STRING, `amount` DOUBLE, `qty` INT, `ratio` FLOAT, `ok` BOOLEAN, `note` STRING, "
        "`tags` ARRAY<STRING>, `counts` MAP<STRING, BIGINT>, `address` STRUCT<`city`: STRING, `zip`: INT>, "
        "`previous` STRUCT<`city`: STRING, `zip`: INT>, `kind` STRING, `at` TIMESTAMP, `day` DATE, `price` DECIMAL(10,2), "
        "`code` BINARY, `either` STRUCT<`member0`: INT, `member1`: STRING>, `wide` BIGINT, `lines` ARRAY<STRUCT<`sku`: STRING>>"
    )
    local = {"type": "record", "name": "R", "fields": [{"name": "t", "type": {"type": "long", "logicalType": "local-timestamp-micros"}}]}
    assert value_ddl(parse_definition(local)) == "`t` TIMESTAMP_NTZ"


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ({"type": "record", "name": "L", "fields": [{"name": "next", "type": ["null", "L"]}]}, "field 'L.next' refers to 'L'.*recursive"),
        (
            {"type": "record", "name": "R", "fields": [{"name": "nothing", "type": "null"}]},
            "field 'R.nothing' has the Avro type null alone",
        ),
        (
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "A", "type": "int"}]},
            "fields 'a' and 'A'.*ignore case",
        ),
        (
            {
                "type": "record",
                "name": "R",
                "fields": [{"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40}}],
            },
            "precision 40",
        ),
        ("string", "must be an Avro record, got 'string'"),
        ({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}, "not a valid Avro schema"),
    ],
)
def test_what_cannot_be_columns_is_refused_naming_the_field(definition: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        value_struct(parse_definition(json.dumps(definition)))


def test_a_json_schema_with_a_map_is_refused() -> None:
    with pytest.raises(ValueError, match="field 'counts' is a map"):
        TopicSchema("JSON", json.dumps(ORDER), 0)


def order(i: int) -> dict[str, Any]:
    """An Order datum exercising every branch: nulls, empty and long arrays, both union members."""
    return {
        "id": i * 1_000_003 - 7_000_000_000,
        "name": "név" * (i % 4),
        "amount": i / 8,
        "qty": -i,
        "ratio": 0.5,
        "ok": i % 2 == 0,
        "note": None if i % 3 else f"note {i}",
        "tags": [f"t{j}" for j in range(i % 7)],
        "counts": {f"k{j}": j * i for j in range(i % 4)},
        "address": {"city": "c" * (i % 5), "zip": None if i % 2 else 10_000 + i},
        "previous": None if i % 4 else {"city": "old", "zip": i},
        "kind": "ABC"[i % 3],
        "at": EPOCH + datetime.timedelta(milliseconds=i * 1001),
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
        "price": decimal.Decimal(i * 37 - 5000) / 100,
        "code": bytes([i % 256, 1, 2]),
        "either": [None, i, str(i)][i % 3],
        "wide": i * 2**33,
        "lines": [{"sku": f"s{i}-{j}"} for j in range(i % 3)],
    }


def encode(definition: dict[str, Any], datum: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(definition), datum)
    return buffer.getvalue()


def fields_of(schema: TopicSchema) -> pa.Schema:
    """The value's Arrow fields as the Spark job has them (Spark's types converted by pyspark)."""
    return arrow_schema(value_struct(schema.record))


def avro_values(definition: dict[str, Any], version: int = 1, writers: dict[int, dict[str, Any]] | None = None) -> AvroValues:
    schema = TopicSchema("AVRO", json.dumps(definition), version)
    return AvroValues(schema, fields_of(schema), lambda v: parse_definition((writers or {})[v]))


def version(number: int) -> str:
    return number.to_bytes(8, "big").decode("latin-1")


def expected(datum: dict[str, Any]) -> dict[str, Any]:
    """fastavro's reading of a datum, as the table's columns hold it."""
    row = dict(datum)
    either = row["either"]
    row["either"] = (
        None
        if either is None
        else {"member0": either if isinstance(either, int) else None, "member1": either if isinstance(either, str) else None}
    )
    row["counts"] = list(row["counts"].items())
    row["at"] = row["at"].astimezone(datetime.timezone.utc)
    return row


def test_avro_values_decode_as_fastavro_reads_them() -> None:
    rng = random.Random(7)
    indices = [rng.randrange(0, 5000) for _ in range(3000)] + [0, 1, 2, 3]
    payloads = [encode(ORDER, order(i)) for i in indices]
    columns = avro_values(ORDER).decode(pa.array(payloads), [version(1)] * len(payloads))

    oracle = fastavro.parse_schema(ORDER)
    rows = pa.table({name: columns[name] for name in fields_of(avro_values(ORDER).schema).names}).to_pylist()
    for payload, row in zip(payloads, rows, strict=True):
        read = fastavro.schemaless_reader(io.BytesIO(payload), oracle)
        read["at"] = read["at"].astimezone(datetime.timezone.utc)
        assert row == expected(read)
    assert columns[CORRUPT_RECORD].null_count == len(payloads)


def test_payloads_of_both_clients_schemas_decode() -> None:
    records = {}
    for module in (pulsar.schema, ours):

        class Point(module.Record):  # type: ignore[name-defined, misc]
            x = module.Integer()
            label = module.String()

        class Shape(module.Record):  # type: ignore[name-defined, misc]
            id = module.Long(required=True)
            points = module.Array(Point())
            props = module.Map(module.String())
            center = Point()

        records[module.__name__] = (module.AvroSchema(Shape), Shape, Point)
    definition = records["pulsar.schema"][1].schema()
    assert definition == records[ours.__name__][1].schema()
    payloads = []
    for schema, shape, point in records.values():
        for i in range(3):
            value = shape(id=i, points=[point(x=j, label=f"p{j}") for j in range(i)], props={"k": str(i)}, center=point(x=-i, label=None))
            payloads.append(schema.encode(value))
    values = avro_values(definition)
    columns = values.decode(pa.array(payloads), [""] * len(payloads))  # no version: the newest schema's
    assert columns["id"].to_pylist() == [0, 1, 2, 0, 1, 2]
    assert columns["points"].to_pylist()[2] == [{"x": 0, "label": "p0"}, {"x": 1, "label": "p1"}]
    assert columns["props"].to_pylist()[1] == [("k", "1")]
    assert columns["center"].to_pylist()[5] == {"x": -2, "label": None}


def test_an_older_version_is_resolved_to_the_newest() -> None:
    v1 = {
        "type": "record",
        "name": "E",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "gone", "type": "string"},
            {"name": "inner", "type": {"type": "record", "name": "I", "fields": [{"name": "a", "type": "float"}]}},
            {"name": "u", "type": ["null", "string", "int"]},
        ],
    }
    v2 = {
        "type": "record",
        "name": "E",
        "fields": [
            {"name": "id", "type": "long"},
            {
                "name": "inner",
                "type": {
                    "type": "record",
                    "name": "I",
                    "fields": [{"name": "a", "type": "double"}, {"name": "b", "type": ["null", "long"], "default": None}],
                },
            },
            {"name": "u", "type": ["null", "int", "string"]},
            {"name": "added", "type": ["null", "string"], "default": None},
            {"name": "level", "type": "int", "default": 3},
            {"name": "renamed", "aliases": ["old_name"], "type": ["null", "string"], "default": None},
        ],
    }
    v1["fields"].append({"name": "old_name", "type": "string"})
    old = [encode(v1, {"id": i, "gone": "x", "inner": {"a": 1.5}, "u": ["s", i, None][i % 3], "old_name": f"o{i}"}) for i in range(3)]
    new = [encode(v2, {"id": 2**40, "inner": {"a": 2.5, "b": 7}, "u": 5, "added": "yes", "level": 9, "renamed": "r"})]
    values = avro_values(v2, version=1, writers={0: v1})
    columns = values.decode(pa.array([old[0], new[0], old[1], old[2]]), [version(0), version(1), version(0), version(0)])

    assert columns["id"].to_pylist() == [0, 2**40, 1, 2]
    assert columns["inner"].to_pylist() == [{"a": 1.5, "b": None}, {"a": 2.5, "b": 7}, {"a": 1.5, "b": None}, {"a": 1.5, "b": None}]
    # The union's members follow the reader's order: member0 is int, member1 string.
    assert columns["u"].to_pylist() == [
        {"member0": None, "member1": "s"},
        {"member0": 5, "member1": None},
        {"member0": 1, "member1": None},
        None,
    ]
    assert columns["added"].to_pylist() == [None, "yes", None, None]
    assert columns["level"].to_pylist() == [3, 9, 3, 3]
    assert columns["renamed"].to_pylist() == ["o0", "r", "o1", "o2"]
    assert "gone" not in columns


def test_values_that_are_not_datums_are_corrupt_records_and_tombstones_are_null() -> None:
    good = encode(ORDER, order(5))
    values: list[bytes | None] = [good, good[:-3], good + b"\x00", None, b"\xff" * 12, b"", good]
    columns = avro_values(ORDER).decode(pa.array(values, pa.binary()), [version(1)] * len(values))

    assert columns["id"].to_pylist() == [order(5)["id"], None, None, None, None, None, order(5)["id"]]
    assert columns["address"].to_pylist()[1] is None and columns["tags"].to_pylist()[4] is None
    corrupt = columns[CORRUPT_RECORD].to_pylist()
    assert corrupt[0] is None and corrupt[3] is None and corrupt[6] is None
    assert [base64.b64decode(corrupt[i]) for i in (1, 2, 4)] == [values[1], values[2], values[4]]
    assert corrupt[5] == ""


def test_json_schema_values_parse_into_the_schemas_columns() -> None:
    class Reading(pulsar.schema.Record):
        sensor = pulsar.schema.String()
        value = pulsar.schema.Double()
        at = pulsar.schema.Long()
        tags = pulsar.schema.Array(pulsar.schema.String())

    definition = dict(Reading.schema())
    definition["fields"] = [
        *definition["fields"],
        {"name": "when", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
    ]
    schema = TopicSchema("JSON", json.dumps(definition), 0)
    encoder = pulsar.schema.JsonSchema(Reading)
    payloads: list[bytes | None] = [encoder.encode(Reading(sensor=f"s{i}", value=i / 2, at=i, tags=["a"] * i)) for i in range(3)]
    payloads += [b'{"sensor": "late", "when": 1700000000123}', b"not json"]
    columns = RegistryJsonValues(schema, fields_of(schema)).decode(pa.array(payloads), [""] * len(payloads))

    assert columns["sensor"].to_pylist() == ["s0", "s1", "s2", "late", None]
    assert columns["tags"].to_pylist()[2] == ["a", "a"]
    assert columns["when"].to_pylist()[3] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)
    assert columns[CORRUPT_RECORD].to_pylist() == [None, None, None, None, "not json"]


def test_arrays_in_several_blocks_and_sized_blocks_decode() -> None:
    # Writers may split an array into blocks; a negative count is followed by the block's size in bytes.
    # [1, 2, 3] as a block of 2 (sized: -2, 2 bytes) and a block of 1; then [] and [-1] in one block each.
    zigzag = {1: b"\x02", 2: b"\x04", 3: b"\x06", -1: b"\x01", -2: b"\x03"}
    payloads = [
        zigzag[-2] + zigzag[2] + zigzag[1] + zigzag[2] + zigzag[1] + zigzag[3] + b"\x00",
        b"\x00",
        zigzag[1] + zigzag[-1] + b"\x00",
        zigzag[3] + zigzag[1] + b"\x00",  # claims 3 items, holds 1
    ]
    values, bad = decode_datums(pa.array(payloads, pa.binary()), {"type": "array", "items": "long"})
    assert values.to_pylist()[:3] == [[1, 2, 3], [], [-1]]
    assert bad.tolist() == [False, False, False, True]
