"""PulsarToTableOperator writing Delta and Iceberg tables on local Spark, exactly once at every
crash point of the parquet path (see test_ingest_local.py), with the jars `make` resolves.

Each format is tested at every crash point on one kind of table (a Delta location, an Iceberg
table of a Hadoop catalog), and on its other kind (a Delta table and an Iceberg table in the Hive
metastore) at the crash that leaves a committed but unreported batch, the one the format's own
idempotence settles. Tables are read back from their logs and metadata (lakehouse_tables.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.standalone.process import BrokerProcess
from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from airflow_pulsar.spark.job.lakehouse import SNAPSHOT_BATCH_ID, delta_app_id
from lakehouse_tables import delta_commits, delta_rows, delta_transactions, iceberg_rows, iceberg_snapshot_summaries
from spark_helpers import LOCAL_SPARK_CONF, VALUE_SCHEMA, Catalog, assert_exactly_once, produce_json, run_crashing

ROOT = Path(__file__).resolve().parents[2]

# Delta's and Iceberg's behaviour, not the broker's, is the subject here.
pytestmark = pytest.mark.one_broker


def lakehouse_jars(table_format: str) -> str:
    """The comma-separated jar list `make lakehouse-jars` resolves from jvm/lakehouse/pom.xml."""
    listing = ROOT / ".jvm" / f"lakehouse-{table_format}.jars"
    assert listing.is_file(), f"{listing} is missing: run `make lakehouse-jars` (part of `make install`)"
    return listing.read_text().strip()


@dataclass(frozen=True)
class LakehouseTable:
    """A table of one format, where the operator writes it and where its files are."""

    table_format: str
    table: str
    directory: Path
    table_catalog: dict[str, str] | None = None

    @classmethod
    def of(cls, kind: str, catalog: Catalog, name: str) -> LakehouseTable:
        if kind == "delta-location":
            return cls("delta", str(catalog.warehouse.parent / "delta" / name), catalog.warehouse.parent / "delta" / name)
        if kind == "delta-metastore":
            return cls("delta", name, catalog.table_dir(name))
        lake = catalog.warehouse.parent / "lake"
        if kind == "iceberg-hadoop":
            return cls("iceberg", f"lake.db.{name}", lake / "db" / name, {"type": "hadoop", "warehouse": str(lake)})
        assert kind == "iceberg-metastore"
        return cls("iceberg", f"db.{name}", catalog.table_dir(f"db.{name}"))

    def rows(self) -> pa.Table:
        return delta_rows(self.directory) if self.table_format == "delta" else iceberg_rows(self.directory)

    def commits(self) -> int:
        """Delta commits, or Iceberg snapshots: how many writes the table took."""
        if self.table_format == "delta":
            return len(delta_commits(self.directory))
        return len(iceberg_snapshot_summaries(self.directory))

    def operator(self, catalog: Catalog, topic: str, subscription: str, **spark: Any) -> PulsarToTableOperator:
        return PulsarToTableOperator(
            task_id="ingest",
            topics=topic,
            subscription=subscription,
            table=self.table,
            format=self.table_format,
            table_catalog=self.table_catalog,
            jars=lakehouse_jars(self.table_format),
            value_format="json",
            value_schema=VALUE_SCHEMA,
            min_partitions=2,
            **{"conf": LOCAL_SPARK_CONF, **spark},
            **catalog.operator_args(),
        )


@pytest.fixture
def admin(pulsar_default: BrokerProcess) -> PulsarAdmin:
    with PulsarAdmin(pulsar_default.web_url) as client:
        yield client


@pytest.mark.parametrize("kind", ["delta-location", "iceberg-hadoop"])
def test_a_crash_at_every_point_then_a_rerun_leaves_each_message_once(
    kind: str, pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = LakehouseTable.of(kind, catalog, "crashes")
    operator = target.operator(catalog, topic_name, "to-lake")
    crash: Callable[[str], None] = lambda point: run_crashing(monkeypatch, point, lambda: operator.execute(context={}))  # noqa: E731
    admin.create_partitioned_topic(topic_name, 2)
    produce_json(pulsar_default.service_url, topic_name, 0, 2_000, batch=100)

    crash("before-write")
    crash("mid-read")  # the executor fails: the write commits nothing
    assert not target.directory.exists() or target.commits() <= 1  # at most the table's creation
    crash("after-write")  # the table holds the batch; the plan log does not know
    written = target.commits()
    assert target.rows().num_rows == 2_000
    assert admin.message_backlog(topic_name, "to-lake").messages == 2_000

    rerun = operator.execute(context={})

    # The batch is written again under its id and sequence: the format keeps it from landing twice.
    assert rerun["settled"]["was"] == "planned" and rerun["settled"]["total_rows"] == 2_000
    assert target.commits() == written
    assert_exactly_once(target.rows(), range(2_000))
    assert admin.backlog(topic_name, "to-lake").msg_backlog == 0

    produce_json(pulsar_default.service_url, topic_name, 2_000, 700, batch=100)
    crash("before-ack")  # the job committed the second batch and reported it
    crash("mid-ack")  # settling acknowledges the first partition, then dies
    assert 0 < admin.message_backlog(topic_name, "to-lake").messages < 700

    final = operator.execute(context={})

    assert final["settled"]["was"] == "committed" and final["settled"]["total_rows"] == 700 and final["skipped"] is True
    rows = target.rows()
    assert_exactly_once(rows, range(2_700))
    assert set(rows.column("batch_id").to_pylist()) == {rerun["settled"]["batch_id"], final["settled"]["batch_id"]}
    assert target.commits() == written + 1
    assert admin.backlog(topic_name, "to-lake").msg_backlog == 0
    if target.table_format == "iceberg":
        carried = [summary.get(SNAPSHOT_BATCH_ID) for summary in iceberg_snapshot_summaries(target.directory)]
        assert [batch for batch in carried if batch] == [rerun["settled"]["batch_id"], final["settled"]["batch_id"]]
    else:
        # Delta recorded the transaction version of the second batch, above the first one's.
        versions = [a["txn"]["version"] for commit in delta_commits(target.directory) for a in commit if "txn" in a]
        assert len(versions) == 2 and versions[0] < versions[1]
        assert set(delta_transactions(target.directory)) == {delta_app_id("to-lake", target.table)}


@pytest.mark.parametrize("kind", ["delta-metastore", "iceberg-metastore"])
def test_a_batch_written_again_into_a_metastore_table_lands_once(
    kind: str, pulsar_default: BrokerProcess, admin: PulsarAdmin, catalog: Catalog, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = LakehouseTable.of(kind, catalog, "events")
    operator = target.operator(catalog, topic_name, "to-metastore")
    admin.create_partitioned_topic(topic_name, 2)
    produce_json(pulsar_default.service_url, topic_name, 0, 1_500, batch=100)
    run_crashing(monkeypatch, "after-write", lambda: operator.execute(context={}))
    written = target.commits()
    assert target.rows().num_rows == 1_500

    rerun = operator.execute(context={})

    assert rerun["settled"]["was"] == "planned" and rerun["settled"]["total_rows"] == 1_500
    assert target.commits() == written
    assert_exactly_once(target.rows(), range(1_500))
    assert admin.backlog(topic_name, "to-metastore").msg_backlog == 0
