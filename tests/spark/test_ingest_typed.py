"""PulsarToTableOperator with ``value_format="schema"``: a topic's registered schema gives the table
typed columns (records as structs), and a new schema version gives it a new column, with no
``value_schema`` anywhere.

Each table takes two runs. The first ingests messages of the schema's first version, sent by the
official client (``pulsar.schema.AvroSchema`` / ``JsonSchema``), and creates the table. Then our
client sends messages of a second version, which adds a field (and, for Iceberg, a field inside
the nested record), and an old producer goes on sending the first version. The second run adds
the column to the table (ALTER TABLE for the Hive parquet table, Delta's schema merge, Iceberg's
schema update) and reads each message with the version it was written with: the new column is
null in every message of the first version, those of the first run and the old producer's alike.

The module runs on one broker (Apache Pulsar when selected): the schema registry's part is held
to one behaviour by the interop tier, and every run here costs a spark-submit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pulsar
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import airflow_pulsar.client as ours
from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from jvm.lakehouse_jars import lakehouse_jars
from tests.support.lakehouse_tables import SMALL_TABLES, LakehouseTable
from tests.support.spark_ingest import LOCAL_SPARK_CONF, SEVERAL_JOBS_TIMEOUT, Catalog

pytestmark = [pytest.mark.one_broker, SEVERAL_JOBS_TIMEOUT]

FIRST, SECOND, OLD_PRODUCER = 120, 80, 40


def order_records(schema: ModuleType, version: int, nested: bool) -> tuple[type, type]:
    """The ``Order`` record of a schema version and its ``Address``, declared with ``schema``
    (``pulsar.schema`` or ours). Version 2 adds ``coupon`` (nullable, default null: a compatible
    change) and, when ``nested``, ``zip`` inside ``address``."""

    class Address(schema.Record):  # type: ignore[name-defined, misc]
        city = schema.String()
        if version == 2 and nested:
            zip = schema.Integer(required_default=True)

    class Order(schema.Record):  # type: ignore[name-defined, misc]
        id = schema.Long(required=True)
        name = schema.String()
        amount = schema.Double()
        tags = schema.Array(schema.String())
        address = Address()
        if version == 2:
            coupon = schema.String(required_default=True)

    return Order, Address


def orders(records: tuple[type, type], version: int, nested: bool, ids: range) -> list[Any]:
    order, address = records
    made = []
    for i in ids:
        fields: dict[str, Any] = {"id": i, "name": f"n{i}", "amount": i / 4, "tags": [f"t{j}" for j in range(i % 3)]}
        place: dict[str, Any] = {"city": f"c{i % 5}"}
        if version == 2:
            fields["coupon"] = f"save{i}"
            if nested:
                place["zip"] = 1000 + i
        made.append(order(address=address(**place), **fields))
    return made


def produce(client_module: ModuleType, service_url: str, topic: str, kind: str, version: int, nested: bool, ids: range) -> None:
    """Orders of a schema version with ids ``ids``, batched, sent with an ``AvroSchema`` or
    ``JsonSchema`` (``kind``) by ``client_module``'s client (the official one, or ours)."""
    records = order_records(client_module.schema, version, nested)
    client = client_module.Client(service_url)
    try:
        schema = getattr(client_module.schema, f"{kind}Schema")(records[0])
        producer = client.create_producer(topic, schema=schema, batching_enabled=True, batching_max_publish_delay_ms=10)
        for value in orders(records, version, nested, ids):
            producer.send_async(value, None)
        producer.flush()
        producer.close()
    finally:
        client.close()


def parquet_rows(directory: Path, hive_partitions: bool = True) -> pa.Table:
    """Every row in the parquet files under ``directory``, those written before a column was added
    and after alike; with ``hive_partitions`` the ``batch_id`` from the directories' names. (The
    tables here only ever gain files.)"""
    partitioning = "hive" if hive_partitions else None
    files = ds.dataset(directory, format="parquet", partitioning=partitioning)
    schema = pa.unify_schemas([fragment.physical_schema for fragment in files.get_fragments()])
    if hive_partitions and "batch_id" not in schema.names:  # Delta writes it in the files too, or not
        schema = schema.append(pa.field("batch_id", pa.string()))
    return ds.dataset(directory, format="parquet", partitioning=partitioning, schema=schema).to_table()


def by_id(rows: pa.Table) -> dict[int, dict[str, Any]]:
    listed = rows.to_pylist()
    found = {row["id"]: row for row in listed}
    assert len(found) == len(listed), "a message was written twice"
    return found


def check_versions(rows: dict[int, dict[str, Any]], nested_zip: bool) -> None:
    """First-version messages have the new columns null; second-version ones have them set."""
    assert sorted(rows) == list(range(FIRST + SECOND + OLD_PRODUCER))
    for i, row in rows.items():
        new = FIRST <= i < FIRST + SECOND
        assert row["name"] == f"n{i}" and row["amount"] == i / 4 and row["tags"] == [f"t{j}" for j in range(i % 3)], row
        assert row["address"]["city"] == f"c{i % 5}", row
        assert row["coupon"] == (f"save{i}" if new else None), row
        assert row["_corrupt_record"] is None
        if nested_zip:
            assert row["address"]["zip"] == (1000 + i if new else None), row


@pytest.fixture
def admin(pulsar_default: BrokerProcess) -> Iterator[PulsarAdmin]:
    with PulsarAdmin(pulsar_default.web_url) as client:
        yield client


def ingest_twice(
    broker: BrokerProcess, admin: PulsarAdmin, topic: str, operator: PulsarToTableOperator, kind: str, nested: bool
) -> tuple[dict[str, Any], dict[str, Any], float]:
    """The two runs around the second schema version (``Avro`` or ``Json``); (first result, second result, seconds)."""
    admin.create_partitioned_topic(topic, 2)
    produce(pulsar, broker.service_url, topic, kind, 1, nested, range(FIRST))
    started = time.monotonic()
    first = operator.execute(context={})
    produce(ours, broker.service_url, topic, kind, 2, nested, range(FIRST, FIRST + SECOND))
    produce(ours, broker.service_url, topic, kind, 1, nested, range(FIRST + SECOND, FIRST + SECOND + OLD_PRODUCER))
    versions = [v["version"] for v in admin.get_all_schemas(topic)]
    assert versions == [0, 1], f"expected two schema versions, got {versions}"
    second = operator.execute(context={})
    return first, second, time.monotonic() - started


def test_an_avro_topic_lands_as_typed_columns_and_a_second_version_adds_a_column(
    pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str
) -> None:
    operator = PulsarToTableOperator(
        task_id="ingest", topics=topic_name, subscription="typed", table="orders", value_format="schema",
        conf=LOCAL_SPARK_CONF, **catalog.operator_args(),
    )  # fmt: skip
    first, second, seconds = ingest_twice(pulsar_default, admin, topic_name, operator, "Avro", nested=False)

    assert first["total_rows"] == FIRST and second["total_rows"] == SECOND + OLD_PRODUCER
    assert "`coupon`" not in first["value_columns"] and "`coupon` STRING" in second["value_columns"]
    assert admin.backlog(topic_name, "typed").msg_backlog == 0
    rows = parquet_rows(catalog.table_dir("orders"))
    schema = rows.schema
    assert schema.field("id").type == pa.int64() and schema.field("amount").type == pa.float64()
    assert schema.field("tags").type.value_type == pa.string()
    assert pa.types.is_struct(schema.field("address").type) and schema.field("coupon").type == pa.string()
    assert "value" not in schema.names
    check_versions(by_id(rows), nested_zip=False)  # the Hive table keeps address as it was created
    # OpenLineage: the table's schema facet lists the columns the registry gave.
    table = operator.get_openlineage_facets_on_complete(None).outputs[0]
    columns = {field.name: field.type for field in table.facets["schema"].fields}
    assert columns["coupon"] == "STRING" and columns["address"] == "STRUCT<`city`: STRING>" and "value" not in columns
    print(f"parquet: two typed runs in {seconds:.1f} s")


@pytest.mark.parametrize("kind", ["delta-location", "iceberg-hadoop"])
def test_lakehouse_tables_take_the_new_columns_nested_ones_too(
    kind: str, pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str
) -> None:
    target = LakehouseTable.of(kind, catalog, "orders")
    jars = lakehouse_jars(target.table_format)
    operator = PulsarToTableOperator(
        task_id="ingest", topics=topic_name, subscription="typed", table=target.table, format=target.table_format,
        table_catalog=target.table_catalog, jars=jars, value_format="schema",
        conf={**LOCAL_SPARK_CONF, **SMALL_TABLES}, **catalog.operator_args(),
    )  # fmt: skip
    # Delta reads a JSON-schema topic, Iceberg an Avro one.
    kind_of_schema = "Json" if kind.startswith("delta") else "Avro"
    first, second, seconds = ingest_twice(pulsar_default, admin, topic_name, operator, kind_of_schema, nested=True)

    assert first["total_rows"] == FIRST and second["total_rows"] == SECOND + OLD_PRODUCER
    # Delta keeps the partition column in the directories' names, Iceberg in the files.
    delta = target.table_format == "delta"
    check_versions(by_id(parquet_rows(target.directory if delta else target.directory / "data", hive_partitions=delta)), nested_zip=True)
    print(f"{kind}: two typed runs in {seconds:.1f} s")


def test_a_topic_without_a_record_schema_is_refused_before_spark_runs(
    pulsar_default: BrokerProcess, catalog: Catalog, topic_name: str
) -> None:
    def ingest(topic: str) -> None:
        PulsarToTableOperator(
            task_id="ingest", topics=topic, subscription=topic, table="refused", value_format="schema", **catalog.operator_args()
        ).execute(context={})

    with ours.Client(pulsar_default.service_url) as client:
        client.create_producer(f"{topic_name}-bytes").send(b"no schema")
        client.create_producer(f"{topic_name}-text", schema=ours.schema.StringSchema()).send("text")
    with pytest.raises(ValueError, match=f"topic '{topic_name}-bytes' has none registered"):
        ingest(f"{topic_name}-bytes")
    with pytest.raises(ValueError, match=f"topic '{topic_name}-text' has a STRING schema"):
        ingest(f"{topic_name}-text")
    assert not catalog.table_dir("refused").exists()
