"""OpenLineage: the datasets the operators report, read back from the events Airflow's OpenLineage
provider writes with its file transport, and the ``pulsar`` asset URI scheme.

The DAG runs with ``airflow dags test`` in a process of its own: the provider reads its settings
(``[openlineage] transport``) once per process and registers its listener when plugins load, so
this test process, which runs other DAGs without OpenLineage, cannot switch it on for one test.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from airflow.sdk import Asset

from airflow_pulsar.assets.pulsar import asset_topic, convert_asset_to_openlineage, create_asset, sanitize_uri
from airflow_pulsar.client.service_info import ServiceUrl
from tests.support.airflow_env import AIRFLOW_BIN, AIRFLOW_ENV, DAGS_FOLDER

# What is checked is the provider's reporting, the same on either broker.
pytestmark = pytest.mark.one_broker

COUNT = 25
ROW_COLUMNS = [
    ("key", "STRING"),
    ("value", "STRING"),
    ("topic", "STRING"),
    ("partition", "INT"),
    ("message_id", "STRUCT<ledger_id: BIGINT, entry_id: BIGINT, batch_index: INT>"),
    ("publish_time", "TIMESTAMP"),
    ("event_time", "TIMESTAMP"),
    ("properties", "MAP<STRING, STRING>"),
    ("redelivery_count", "INT"),
    ("batch_id", "STRING"),
]


# ---- the pulsar asset URI scheme, as Airflow applies it with the provider installed ----


@pytest.mark.parametrize(
    "given",
    [
        "pulsar://broker-1:6650/persistent/public/default/orders",
        "pulsar://Broker-1/persistent/public/default/orders",
        "pulsar://broker-1:6650/orders",
        "pulsar://broker-1/public/default/orders/",
        "PULSAR://broker-1:6650/persistent/public/default/orders#ignored",
    ],
)
def test_pulsar_asset_uris_are_normalised_to_host_port_and_full_topic(given: str) -> None:
    asset = Asset(given)
    assert asset.uri == "pulsar://broker-1:6650/persistent/public/default/orders"
    assert asset_topic(asset) == ("pulsar://broker-1:6650", "persistent://public/default/orders")


def test_pulsar_asset_uri_keeps_domain_partition_and_ipv6_host() -> None:
    assert Asset("pulsar://[::1]:6651/non-persistent/t1/ns1/ticks-partition-2").uri == (
        "pulsar://[::1]:6651/non-persistent/t1/ns1/ticks-partition-2"
    )


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("pulsar://broker-1", "names no topic"),
        ("pulsar://broker-1:6650/", "names no topic"),
        ("pulsar:///persistent/public/default/orders", "must name one broker host"),
        ("pulsar://a:6650,b:6650/orders", "must name one broker host"),
        ("pulsar://broker-1:port/orders", "has a bad port"),
        ("pulsar://broker-1:70000/orders", "has a bad port"),
        ("pulsar://broker-1/public/orders", "does not name a topic: invalid topic name 'public/orders'"),
        ("pulsar://broker-1/persistent/public/default/a/b", "does not name a topic"),
        ("pulsar://broker-1/persistent/bad tenant/default/orders", "bad tenant 'bad tenant'"),
        ("pulsar://broker-1/orders?partition=1", "takes no query"),
    ],
)
def test_bad_pulsar_asset_uris_are_rejected_naming_the_problem(bad: str, message: str) -> None:
    with pytest.raises(ValueError, match="pulsar asset URI") as raised:
        Asset(bad)
    assert message in str(raised.value)


def test_asset_factory_and_openlineage_conversion() -> None:
    asset = create_asset(topic="orders", service_url="pulsar+ssl://Broker-1:6651,broker-2:6651", extra={"team": "shop"})
    assert asset.uri == asset.name == "pulsar://broker-1:6651/persistent/public/default/orders"
    assert asset.extra == {"team": "shop"}
    dataset = convert_asset_to_openlineage(asset, None)
    assert (dataset.namespace, dataset.name) == ("pulsar://broker-1:6651", "persistent://public/default/orders")
    with pytest.raises(ValueError, match="must start with pulsar://"):
        create_asset(topic="orders", service_url="http://broker-1:8080")


def test_provider_registers_the_pulsar_scheme_with_airflow() -> None:
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManagerTaskRuntime()
    assert manager.asset_uri_handlers["pulsar"] is sanitize_uri
    assert manager.asset_factories["pulsar"] is create_asset
    assert manager.asset_to_openlineage_converters["pulsar"] is convert_asset_to_openlineage


# ---- how the ingest table is named, from the operator's Spark settings ----


@dataclass
class Write:
    """The ingest operator's settings that name its table (``lineage.TableWrite``)."""

    table: str = "sales.orders"
    conf: dict[str, Any] | None = None
    warehouse_dir: str | None = None
    table_format: str = "parquet"
    value_format: str = "bytes"
    value_schema: str | None = None
    topics: str | list[str] = "orders"
    pulsar_conn_id: str = "pulsar_default"


def _table(write: Write, rows: int | None = None) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]] | None:
    from openlineage.client.serde import Serde

    from airflow_pulsar.lineage import table_output

    dataset = table_output(write, rows)
    if dataset is None:
        return None
    body = json.loads(Serde.to_json(dataset))
    return body["namespace"], body["name"], body["facets"].get("symlinks", {}).get("identifiers", []), body


METASTORE = {"spark.hadoop.hive.metastore.uris": "thrift://Metastore-1:9083,thrift://metastore-2:9083"}


@pytest.mark.parametrize(
    ("write", "expected"),
    [
        (Write(warehouse_dir="/data/wh"), ("file", "/data/wh/sales.db/orders", "/data/wh/sales.db", "sales.orders")),
        (
            Write(table="Orders", conf={"spark.sql.warehouse.dir": "file:/data/wh/"}),
            ("file", "/data/wh/orders", "/data/wh", "default.orders"),
        ),
        (Write(table="spark_catalog.sales.orders", warehouse_dir="/wh"), ("file", "/wh/sales.db/orders", "/wh/sales.db", "sales.orders")),
        (Write(warehouse_dir="hdfs://nn-1:8020/wh"), ("hdfs://nn-1:8020", "/wh/sales.db/orders", "/wh/sales.db", "sales.orders")),
        (Write(warehouse_dir="/wh", conf=METASTORE), ("file", "/wh/sales.db/orders", "hive://metastore-1:9083", "sales.orders")),
        (Write(conf={"spark.sql.hive.metastore.uris": "thrift://ms"}), ("hive://ms:9083", "sales.orders", None, None)),
        (Write(), None),
        (Write(table="iceberg.sales.orders", warehouse_dir="/wh"), None),
    ],
)
def test_ingest_table_is_named_by_its_warehouse_location_or_metastore(write: Write, expected: tuple[str | None, ...] | None) -> None:
    found = _table(write)
    if expected is None:
        assert found is None
        return
    assert found is not None
    namespace, name, symlinks, _ = found
    assert (namespace, name) == expected[:2]
    if expected[2] is None:
        assert symlinks == []
    else:
        assert symlinks == [{"namespace": expected[2], "name": expected[3], "type": "TABLE"}]


def test_ingest_table_schema_follows_value_and_table_format() -> None:
    def columns(**settings: Any) -> list[tuple[str, str]]:
        found = _table(Write(warehouse_dir="/wh", **settings), rows=7)
        assert found is not None
        body = found[3]
        assert body["outputFacets"]["outputStatistics"]["rowCount"] == 7
        return [(f["name"], f["type"]) for f in body["facets"]["schema"]["fields"]]

    assert columns(value_format="bytes")[:2] == [("key", "STRING"), ("value", "BINARY")]
    json_columns = columns(value_format="json", value_schema="id BIGINT, tags ARRAY<STRING>")
    assert json_columns[:4] == [("key", "STRING"), ("id", "BIGINT"), ("tags", "ARRAY<STRING>"), ("_corrupt_record", "STRING")]
    # csv holds no struct or map: the job writes the message id as three columns, the properties as JSON.
    csv_columns = dict(columns(table_format="csv", value_format="string"))
    assert "message_id" not in csv_columns
    assert [csv_columns[f"message_{part}"] for part in ("ledger_id", "entry_id", "batch_index")] == ["BIGINT", "BIGINT", "INT"]
    assert csv_columns["properties"] == "STRING"


# ---- the operators' lineage, from a real run with the OpenLineage provider on ----


@dataclass
class LineageRun:
    """What one run of the ``pulsar_lineage`` DAG reported: the events, and what it ran against."""

    events: list[dict[str, Any]]
    namespace: str
    topic: str
    warehouse: Path

    def event(self, task_id: str, event_type: str) -> dict[str, Any]:
        (found,) = [e for e in self.events if e["job"]["name"] == f"pulsar_lineage.{task_id}" and e["eventType"] == event_type]
        return found


@pytest.fixture(scope="module")
def lineage_run(broker: Any, airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> LineageRun:
    work = tmp_path_factory.mktemp("lineage")
    events = work / "events.jsonl"
    topic = f"lineage-orders-{os.getpid()}"
    conf = {
        "topic": topic,
        "count": COUNT,
        "out": str(work / "consumed.txt"),
        "warehouse": str(work / "warehouse"),
        "metastore": str(work / "metastore"),
    }
    # A DAGs folder of this one DAG: the command parses the whole folder before it runs the DAG.
    dags = work / "dags"
    dags.mkdir()
    (dags / "pulsar_lineage.py").symlink_to(DAGS_FOLDER / "pulsar_lineage.py")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__OPENLINEAGE", "OPENLINEAGE"))},
        **AIRFLOW_ENV,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        # spark-submit is the one pip installed with pyspark into this environment.
        "PATH": f"{AIRFLOW_BIN.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
        ),
        "AIRFLOW__OPENLINEAGE__DISABLED": "False",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "airflow-pulsar-tests",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events), "append": True}),
    }
    result = subprocess.run(
        [str(AIRFLOW_BIN), "dags", "test", "pulsar_lineage", "--conf", json.dumps(conf)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "state=success" in output, output[-4000:]
    host, port = ServiceUrl(broker.service_url).hosts[0]
    return LineageRun(
        events=[json.loads(line) for line in events.read_text().splitlines() if line.strip()],
        namespace=f"pulsar://{host}:{port}",
        topic=f"persistent://public/default/{topic}",
        warehouse=work / "warehouse",
    )


def _ids(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def test_produce_reports_its_topic_as_output_with_the_messages_sent(lineage_run: LineageRun) -> None:
    start, complete = lineage_run.event("produce", "START"), lineage_run.event("produce", "COMPLETE")
    for event in (start, complete):
        assert event["inputs"] == []
        assert _ids(event["outputs"]) == [(lineage_run.namespace, lineage_run.topic)]
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == COUNT
    assert complete["job"]["namespace"] == "airflow-pulsar-tests"


def test_consume_reports_its_topics_as_inputs(lineage_run: LineageRun) -> None:
    for event_type in ("START", "COMPLETE"):
        event = lineage_run.event("consume", event_type)
        assert _ids(event["inputs"]) == [(lineage_run.namespace, lineage_run.topic)]
        assert event["outputs"] == []


def test_ingest_reports_topics_in_and_the_table_out_with_schema_and_rows(lineage_run: LineageRun) -> None:
    table_dir = lineage_run.warehouse / "lineage.db" / "orders"
    assert any(table_dir.rglob("*.parquet")), "the job wrote no table files"
    start, complete = lineage_run.event("ingest", "START"), lineage_run.event("ingest", "COMPLETE")
    for event in (start, complete):
        assert _ids(event["inputs"]) == [(lineage_run.namespace, lineage_run.topic)]
        (table,) = event["outputs"]
        assert (table["namespace"], table["name"]) == ("file", str(table_dir))
        assert [(f["name"], f["type"]) for f in table["facets"]["schema"]["fields"]] == ROW_COLUMNS
        (symlink,) = table["facets"]["symlinks"]["identifiers"]
        assert symlink == {"namespace": str(table_dir.parent), "name": "lineage.orders", "type": "TABLE"}
    assert "outputStatistics" not in start["outputs"][0].get("outputFacets", {})
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == COUNT


def test_event_namespace_matches_the_asset_of_the_topic(lineage_run: LineageRun) -> None:
    """The asset of a topic and the dataset an operator reports for it are one OpenLineage dataset."""
    host = urlsplit(lineage_run.namespace).netloc
    asset = Asset(f"pulsar://{host}/{lineage_run.topic.replace('://', '/')}")
    dataset = convert_asset_to_openlineage(asset, None)
    assert (dataset.namespace, dataset.name) in _ids(lineage_run.event("produce", "COMPLETE")["outputs"])
