"""How a table's schema follows the rows of a batch (``evolution.merge``), and how the job's spec and
formats take ``value_format="schema"``."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from airflow_pulsar.spark.job.columns import row_ddl
from airflow_pulsar.spark.job.evolution import merge
from airflow_pulsar.spark.job.plan import IngestPlan
from airflow_pulsar.spark.job.spec import IngestJobSpec, check_formats, top_level_names
from airflow_pulsar.spark.job.topic_schema import TopicSchema


def struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, kind) for name, kind in fields])  # type: ignore[arg-type]


ADDRESS = struct(("city", StringType()))
TABLE = struct(("key", StringType()), ("id", LongType()), ("address", ADDRESS), ("lines", ArrayType(ADDRESS)), ("batch_id", StringType()))


def test_new_columns_and_nested_fields_are_added_and_missing_ones_kept() -> None:
    rows = struct(
        ("key", StringType()),
        ("ID", LongType()),  # names match whatever their case
        ("address", struct(("city", StringType()), ("zip", IntegerType()))),
        ("lines", ArrayType(struct(("city", StringType()), ("note", StringType())))),
        ("coupon", StringType()),
        ("batch_id", StringType()),
    )
    change = merge(TABLE, rows, "orders")

    assert change.added == [
        (("address", "zip"), IntegerType()),
        (("lines", "element", "note"), StringType()),
        (("coupon",), StringType()),
    ]
    assert [f.name for f in change.merged.fields] == ["key", "id", "address", "lines", "batch_id", "coupon"]
    assert change.merged["address"].dataType == struct(("city", StringType()), ("zip", IntegerType()))

    fewer = merge(TABLE, struct(("key", StringType()), ("batch_id", StringType())), "orders")
    assert fewer.added == [] and fewer.merged == TABLE


def test_narrower_numbers_are_taken_and_other_type_changes_refused_naming_the_column() -> None:
    table = struct(("n", LongType()), ("x", DoubleType()), ("m", MapType(StringType(), ADDRESS)))
    assert merge(table, struct(("n", IntegerType()), ("x", FloatType())), "t").added == []
    with pytest.raises(ValueError, match=r"column 'n' of table t is bigint, but this batch's rows have string"):
        merge(table, struct(("n", StringType())), "t")
    with pytest.raises(ValueError, match=r"column 'm.value.city' of table t is string, but this batch's rows have int"):
        merge(table, struct(("m", MapType(StringType(), struct(("city", IntegerType()))))), "t")


RECORD = {"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "at", "type": "string"}]}


def plan(table: str = "orders") -> IngestPlan:
    return IngestPlan("b1", "sub", table, ())


def test_the_spec_carries_the_topic_schema() -> None:
    schema = TopicSchema("AVRO", json.dumps(RECORD), 3)
    spec = IngestJobSpec(plan(), "plans", "pulsar://localhost:6650", value_format="schema", topic_schema=schema)

    again = IngestJobSpec.from_json(spec.to_json())
    assert again.topic_schema == schema and again.topic_schema.record["fields"][0]["name"] == "id"
    assert top_level_names(row_ddl("schema", schema.value_ddl()))[:4] == ["key", "id", "at", "_corrupt_record"]
    with pytest.raises(ValueError, match="topic_schema exactly when value_format is 'schema'"):
        IngestJobSpec(plan(), "plans", "pulsar://localhost:6650", value_format="schema")
    clashing = TopicSchema("AVRO", json.dumps({**RECORD, "fields": [{"name": "topic", "type": "string"}]}), 0)
    with pytest.raises(ValueError, match=r"value fields \['topic'\] clash"):
        IngestJobSpec(plan(), "plans", "pulsar://localhost:6650", value_format="schema", topic_schema=clashing)


@pytest.mark.parametrize(
    ("table_format", "value_schema", "message"),
    [
        ("csv", None, "csv format cannot hold the struct"),
        ("parquet", "id BIGINT", "value_schema is only used with value_format 'json'"),
    ],
)
def test_schema_values_refuse_what_they_cannot_write(table_format: str, value_schema: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_formats(table_format, "schema", value_schema)
    check_formats("iceberg", "schema", None)
