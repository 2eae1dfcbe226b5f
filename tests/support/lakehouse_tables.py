"""The tables of the ingest tests, of each format: where the operator writes them, and what they
hold, read from their logs or metadata and their parquet files without Spark (a second Spark
process would need the Derby metastore the jobs use, which admits one process at a time, and the
tests would pay for another JVM).

Parquet: the files of the table's ``batch_id=`` directories. Delta: the ``_delta_log`` commits,
replayed (``add`` minus ``remove``); partition values come from the log where the data files leave
them out. Iceberg: the newest ``*.metadata.json``, its current snapshot's manifest list and
manifests (Avro, read with fastavro), and the data files they list as live.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import fastavro
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from airflow_pulsar.operators.pulsar_to_table import PulsarToTableOperator
from jvm.lakehouse_jars import lakehouse_jars
from tests.support.spark_ingest import LOCAL_SPARK_CONF, VALUE_SCHEMA, Catalog, assert_exactly_once

# Delta rebuilds a table's state from its log in 50 tasks by default: a few suit these tables.
SMALL_TABLES = {"spark.databricks.delta.snapshotPartitions": "2"}

# Iceberg manifest entry status of a data file the snapshot no longer has.
_ICEBERG_DELETED = 2


def delta_commits(directory: Path) -> list[list[dict[str, Any]]]:
    """The actions of each commit of a Delta table, oldest first."""
    log = directory / "_delta_log"
    assert log.is_dir(), f"no Delta table at {directory}"
    assert not (log / "_last_checkpoint").exists(), "a checkpointed Delta log: replaying JSON commits would miss files"
    return [[json.loads(line) for line in path.read_text().splitlines() if line] for path in sorted(log.glob("*.json"))]


def delta_rows(directory: Path) -> pa.Table:
    """Every row of a Delta table, with its partition column ``batch_id``."""
    live: dict[str, str] = {}
    for commit in delta_commits(directory):
        for action in commit:
            if "add" in action:
                live[action["add"]["path"]] = action["add"]["partitionValues"]["batch_id"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    parts = []
    for path, batch_id in sorted(live.items()):
        part = pq.read_table(directory / unquote(path))
        if "batch_id" not in part.column_names:
            part = part.append_column("batch_id", pa.array([batch_id] * part.num_rows, pa.string()))
        parts.append(part)
    assert parts, f"the Delta table at {directory} holds no data files"
    return pa.concat_tables(parts)


def delta_transactions(directory: Path) -> dict[str, int]:
    """The newest ``txn`` version Delta recorded per application id."""
    versions: dict[str, int] = {}
    for commit in delta_commits(directory):
        for action in commit:
            if "txn" in action:
                versions[action["txn"]["appId"]] = action["txn"]["version"]
    return versions


def iceberg_metadata(directory: Path) -> dict[str, Any]:
    """The table's newest metadata file (Hadoop catalogs name them v<N>, Hive ones <N>-<uuid>)."""
    files = [json.loads(path.read_text()) for path in (directory / "metadata").glob("*.metadata.json")]
    assert files, f"no Iceberg metadata under {directory}"
    return max(files, key=lambda metadata: (metadata.get("last-sequence-number", 0), metadata["last-updated-ms"]))


def iceberg_snapshot_summaries(directory: Path) -> list[dict[str, str]]:
    """The summary of each snapshot of the table, oldest first."""
    return [snapshot["summary"] for snapshot in iceberg_metadata(directory).get("snapshots", [])]


def _local(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path)) if "://" in uri or uri.startswith("file:") else Path(uri)


def _avro_records(uri: str) -> list[dict[str, Any]]:
    with _local(uri).open("rb") as stream:
        return list(fastavro.reader(stream))


def iceberg_files(directory: Path) -> list[str]:
    """The data files of the table's current snapshot."""
    metadata = iceberg_metadata(directory)
    current = metadata.get("current-snapshot-id")
    snapshot = next(s for s in metadata["snapshots"] if s["snapshot-id"] == current)
    return sorted(
        entry["data_file"]["file_path"]
        for manifest in _avro_records(snapshot["manifest-list"])
        for entry in _avro_records(manifest["manifest_path"])
        if entry["status"] != _ICEBERG_DELETED
    )


def iceberg_rows(directory: Path) -> pa.Table:
    """Every row of the table's current snapshot."""
    files = iceberg_files(directory)
    assert files, f"the Iceberg table at {directory} holds no data files"
    return pa.concat_tables([pq.read_table(_local(path)) for path in files])


def delta_files(directory: Path) -> list[str]:
    """The data files of the Delta table's newest version."""
    live: set[str] = set()
    for commit in delta_commits(directory):
        for action in commit:
            if "add" in action:
                live.add(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
    return sorted(live)


def parquet_files(directory: Path) -> list[str]:
    """The data files of a parquet table's partitions, as readers of the table see them (names
    starting with ``_`` or ``.``, and what is under them, are not the table's)."""
    return sorted(
        str(path.relative_to(directory))
        for path in directory.rglob("*")
        if path.is_file() and not any(part.startswith(("_", ".")) for part in path.relative_to(directory).parts)
    )


@dataclass(frozen=True)
class LakehouseTable:
    """A table of one format, where the operator writes it and where its files are."""

    table_format: str
    table: str
    directory: Path
    table_catalog: dict[str, str] | None = None

    @classmethod
    def of(cls, kind: str, catalog: Catalog, name: str) -> LakehouseTable:
        if kind == "parquet":
            return cls("parquet", name, catalog.table_dir(name))
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
        if self.table_format == "parquet":
            return ds.dataset(self.directory, format="parquet", partitioning="hive").to_table()
        return delta_rows(self.directory) if self.table_format == "delta" else iceberg_rows(self.directory)

    def commits(self) -> int:
        """Delta commits, or Iceberg snapshots: how many writes the table took."""
        if self.table_format == "delta":
            return len(delta_commits(self.directory))
        return len(iceberg_snapshot_summaries(self.directory))

    def files(self) -> list[str]:
        """The data files the table is made of now: what a write that changes the table changes."""
        if self.table_format == "parquet":
            return parquet_files(self.directory)
        return delta_files(self.directory) if self.table_format == "delta" else iceberg_files(self.directory)

    def operator_arguments(self, catalog: Catalog, topic: str, subscription: str, **spark: Any) -> dict[str, Any]:
        """The arguments of an ingest of JSON messages into this table, on local Spark unless
        ``spark`` says otherwise (as JSON, for a task process)."""
        conf = {**spark.pop("conf", LOCAL_SPARK_CONF), **SMALL_TABLES}
        return {
            "topics": topic,
            "subscription": subscription,
            "table": self.table,
            "format": self.table_format,
            "table_catalog": self.table_catalog,
            "jars": lakehouse_jars(self.table_format),
            "value_format": "json",
            "value_schema": VALUE_SCHEMA,
            "min_partitions": 2,
            "conf": conf,
            **spark,
            **catalog.operator_args(),
        }

    def operator(self, catalog: Catalog, topic: str, subscription: str, **spark: Any) -> PulsarToTableOperator:
        """An ingest of JSON messages into this table, on local Spark unless ``spark`` says otherwise."""
        return PulsarToTableOperator(task_id="ingest", **self.operator_arguments(catalog, topic, subscription, **spark))

    def crash_after_write_then_rerun(
        self, crash_after_write: Callable[[], None], rerun: Callable[[], dict[str, Any]], messages: int
    ) -> dict[str, Any]:
        """The job dies once the table holds its batch of ``messages`` (ids from 0), before reporting
        it (``crash_after_write``); ``rerun`` writes the batch again, which the format must keep
        from landing twice. The rerun's result."""
        crash_after_write()
        written = self.commits()
        assert self.rows().num_rows == messages

        result = rerun()

        assert result["settled"]["was"] == "planned" and result["settled"]["total_rows"] == messages
        assert self.commits() == written
        assert_exactly_once(self.rows(), range(messages))
        return result
