"""OpenLineage datasets of the operators: Pulsar topics, and the table an ingest writes.

The operators' ``get_openlineage_facets_on_start`` / ``_on_complete`` methods (called by the
OpenLineage provider's listener, when it is installed and enabled) build their answers here.

* A topic is the dataset of namespace ``pulsar://host:port`` (the connection's service URL, its
  first host) and name the full topic name, as the ``pulsar`` asset scheme names it
  (:mod:`airflow_pulsar.assets.pulsar`) and as OpenLineage names Kafka topics.
* The ingest table is named as Spark's own OpenLineage integration names a catalog table: by its
  location (namespace ``file`` for a local warehouse, else ``scheme://authority``; name the
  path), with a ``TABLE`` symlink to ``database.table`` (in ``hive://host:port`` when the Spark
  configuration names a metastore service). Without a known warehouse it is the Hive table
  itself; without either, the table is left out (the location is the cluster's to decide).
  It carries the schema of the rows the job writes and, on completion, the rows it wrote. With
  ``value_format="schema"`` the value's columns come from the topics' registry when the job is
  submitted: the schema on start lists the other columns, the one on completion all of them.

Nothing here runs unless the OpenLineage provider calls the operators' methods.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from airflow_pulsar.assets.pulsar import cluster_namespace, full_topic_name
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.spark.job.columns import row_ddl
from airflow_pulsar.spark.job.records import PLANNED
from airflow_pulsar.spark.job.spec import top_level_fields

if TYPE_CHECKING:
    from airflow.providers.common.compat.openlineage.facet import (
        InputDataset,
        OutputDataset,
        SchemaDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.generated.base import OutputDatasetFacet

# Where Spark reads a Hive metastore service's address (thrift://host:port[,...]).
_METASTORE_KEYS = ("spark.sql.hive.metastore.uris", "spark.hadoop.hive.metastore.uris")
_METASTORE_PORT = 9083
_DEFAULT_DATABASE = "default"
# Spark's own catalog: the one a database.table name (or a spark_catalog.database.table one) is in.
_SESSION_CATALOG = "spark_catalog"


class TableWrite(Protocol):
    """What :func:`ingest_lineage` reads of an ingest operator (``PulsarToTableOperator``)."""

    @property
    def topics(self) -> str | list[str]: ...
    @property
    def table(self) -> str: ...
    @property
    def table_format(self) -> str: ...
    @property
    def value_format(self) -> str: ...
    @property
    def value_schema(self) -> str | None: ...
    @property
    def conf(self) -> dict[str, Any] | None: ...
    @property
    def warehouse_dir(self) -> str | None: ...
    @property
    def pulsar_conn_id(self) -> str: ...


def cluster_of(pulsar_conn_id: str) -> str:
    """The namespace of a connection's topics, ``pulsar://host:port``; reads the connection only."""
    return cluster_namespace(PulsarHook(pulsar_conn_id=pulsar_conn_id).service_url)


def topic_names(topics: str | Iterable[Any]) -> list[str]:
    """The full names of a topic or a list of them (patterns, which name no one topic, are left out)."""
    given = [topics] if isinstance(topics, str) else list(topics)
    return [full_topic_name(topic) for topic in given if isinstance(topic, str)]


def topic_inputs(namespace: str, topics: Sequence[str]) -> list[InputDataset]:
    """The input datasets of topics read from the cluster ``namespace``."""
    from airflow.providers.common.compat.openlineage.facet import InputDataset

    return [InputDataset(namespace=namespace, name=topic) for topic in topics]


def _written(rows: int | None) -> dict[str, OutputDatasetFacet]:
    """The output statistics facet of ``rows`` written (messages, for a topic); none when unknown."""
    from airflow.providers.common.compat.openlineage.facet import OutputStatisticsOutputDatasetFacet

    return {} if rows is None else {"outputStatistics": OutputStatisticsOutputDatasetFacet(rowCount=rows)}


def topic_output(namespace: str, topic: str, messages: int | None = None) -> OutputDataset:
    """The output dataset of a topic written on the cluster ``namespace``, with how many messages when known."""
    from airflow.providers.common.compat.openlineage.facet import OutputDataset

    return OutputDataset(namespace=namespace, name=topic, outputFacets=_written(messages))


def lineage(inputs: Sequence[Any] = (), outputs: Sequence[Any] = ()) -> OperatorLineage:
    """An ``OperatorLineage`` of the given datasets."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(inputs=list(inputs), outputs=list(outputs))


# ---- the ingest table ----


def table_schema(table_format: str, value_format: str, value_schema: str | None) -> SchemaDatasetFacet:
    """The columns an ingest writes (see :mod:`airflow_pulsar.spark.job.columns`) as a schema facet;
    ``value_schema`` is the DDL of the value's fields (for ``schema`` values, the registry's when known).

    A csv table holds no struct or map: the job stores the message id as three columns and the
    properties as JSON text (``write.storable``), and the facet says so.
    """
    from airflow.providers.common.compat.openlineage.facet import SchemaDatasetFacet, SchemaDatasetFacetFields

    fields: list[tuple[str, str]] = []
    for name, kind in top_level_fields(row_ddl(value_format, value_schema)):
        if table_format == "csv" and name == "message_id":
            fields += [(f"message_{part}", part_kind) for part, part_kind in top_level_fields(kind[len("STRUCT<") : -1].replace(":", ""))]
        elif table_format == "csv" and name == "properties":
            fields.append((name, "STRING"))
        else:
            fields.append((name, kind))
    return SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=name, type=kind) for name, kind in fields])


def _metastore(conf: Mapping[str, Any]) -> str | None:
    """``hive://host:port`` of the first metastore service the Spark configuration names, if any."""
    for key in _METASTORE_KEYS:
        if conf.get(key):
            first = urlsplit(str(conf[key]).split(",")[0].strip())
            if first.hostname:
                return f"hive://{first.hostname}:{first.port or _METASTORE_PORT}"
    return None


def _location(warehouse: str, database: str, table: str) -> tuple[str, str]:
    """(namespace, path) of a table's directory in the warehouse, where Spark puts a managed table."""
    parts = urlsplit(warehouse)
    base = parts.path if parts.scheme else warehouse
    if parts.scheme in ("", "file"):
        namespace, base = "file", os.path.abspath(base)
    else:
        namespace = f"{parts.scheme}://{parts.netloc}" if parts.netloc else parts.scheme
    directory = base.rstrip("/") if database == _DEFAULT_DATABASE else f"{base.rstrip('/')}/{database}.db"
    return namespace, f"{directory}/{table}"


def table_output(write: TableWrite, rows: int | None = None, value_columns: str | None = None) -> OutputDataset | None:
    """The table an ingest writes, with its schema and (when known) the rows written; None where
    the Spark configuration tells neither its warehouse nor its metastore, or for another catalog.
    ``value_columns`` are the value's columns a ``schema`` run read from the registry."""
    from airflow.providers.common.compat.openlineage.facet import (
        Identifier,
        OutputDataset,
        SymlinksDatasetFacet,
    )

    parts = write.table.lower().split(".")
    if len(parts) == 3 and parts[0] != _SESSION_CATALOG:
        return None
    database, table = (parts[-2], parts[-1]) if len(parts) > 1 else (_DEFAULT_DATABASE, parts[0])
    conf = write.conf or {}
    metastore = _metastore(conf)
    warehouse = write.warehouse_dir or conf.get("spark.sql.warehouse.dir")
    facets: dict[str, Any] = {"schema": table_schema(write.table_format, write.value_format, value_columns or write.value_schema)}
    if warehouse:
        namespace, name = _location(str(warehouse), database, table)
        symlink = Identifier(namespace=metastore or name.rpartition("/")[0], name=f"{database}.{table}", type="TABLE")
        facets["symlinks"] = SymlinksDatasetFacet(identifiers=[symlink])
    elif metastore:
        namespace, name = metastore, f"{database}.{table}"
    else:
        return None
    return OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=_written(rows))


def written_rows(summary: Mapping[str, Any]) -> int | None:
    """Rows an ingest run wrote: its new batch, and a planned batch it settled by writing it again."""
    if "total_rows" not in summary:
        return None
    settled = summary.get("settled") or {}
    again = settled.get("total_rows", 0) if settled.get("was") == PLANNED else 0
    return int(summary["total_rows"]) + int(again)


def ingest_lineage(write: TableWrite, summary: Mapping[str, Any] | None = None) -> OperatorLineage:
    """Topics in, table out (with the rows written, from the run's ``summary`` when given)."""
    inputs = topic_inputs(cluster_of(write.pulsar_conn_id), topic_names(write.topics))
    value_columns = summary.get("value_columns") if summary is not None else None
    output = table_output(write, written_rows(summary) if summary is not None else None, value_columns)
    return lineage(inputs, [output] if output is not None else [])
