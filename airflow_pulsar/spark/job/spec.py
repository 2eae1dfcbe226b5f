"""What the ingest job is asked to do: its single argument, as JSON.

The operator builds an :class:`IngestJobSpec` and passes it on the spark-submit command line,
compressed (:meth:`IngestJobSpec.to_argument`); the driver parses it and hands it to the data
source, whose executors read it too. Secrets are not part of it: they travel in files shipped
with the job, which :class:`~.credentials.JobAuth` names.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_pulsar.client import Client

from .credentials import JobAuth
from .plan import IngestPlan
from .topic_schema import TopicSchema

FILE_FORMATS = ("parquet", "orc", "json", "csv")
# Table formats whose Spark integration comes in jars that must be on the cluster (see
# airflow_pulsar.spark.table_formats).
JAR_FORMATS = ("delta", "iceberg")
TABLE_FORMATS = (*FILE_FORMATS, *JAR_FORMATS)

VALUE_BYTES = "bytes"
VALUE_STRING = "string"
VALUE_JSON = "json"
# The value's columns come from the topic's registered AVRO or JSON schema (see topic_schema.py).
VALUE_SCHEMA = "schema"
VALUE_FORMATS = (VALUE_BYTES, VALUE_STRING, VALUE_JSON, VALUE_SCHEMA)

# The columns every row has besides the value (see columns.py); value fields may not reuse them.
ROW_COLUMNS = frozenset(
    {
        "key",
        "_corrupt_record",
        "topic",
        "partition",
        "message_id",
        "publish_time",
        "event_time",
        "properties",
        "redelivery_count",
        "batch_id",
    }
)

# Client settings that may travel in the spec (no secrets, no paths: files travel as JobAuth says).
CLIENT_SETTINGS = (
    "use_tls",
    "tls_allow_insecure_connection",
    "tls_validate_hostname",
    "operation_timeout_seconds",
)


# Marks the compressed form of the job's argument (JSON starts with a brace).
ARGUMENT_PREFIX = "zlib:"


@dataclass(frozen=True)
class IngestJobSpec:
    """The batch to write and how: plan, broker, table format and how message values are decoded
    (for ``schema`` values, with ``topic_schema``, the topics' schema the operator read)."""

    plan: IngestPlan
    plan_topic: str
    service_url: str
    table_format: str = "parquet"
    value_format: str = VALUE_BYTES
    value_schema: str | None = None
    read_timeout_seconds: float = 120.0
    client_settings: dict[str, Any] = field(default_factory=dict)
    #: How the job authenticates, from files shipped with it (see :mod:`.credentials`).
    auth: JobAuth = field(default_factory=JobAuth)
    topic_schema: TopicSchema | None = None
    #: The fewest Spark tasks to read with (the operator's ``min_partitions``): ranges are read
    #: several to a task only down to this many tasks (see :mod:`.read_tasks`).
    min_tasks: int = 1
    #: Which submit of the batch this is (see :mod:`.records`): the job's report names it.
    attempt: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.min_tasks, bool) or not isinstance(self.min_tasks, int) or self.min_tasks < 1:
            raise ValueError(f"min_tasks must be a positive int, got {self.min_tasks!r}")
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int) or self.attempt < 1:
            raise ValueError(f"attempt must be a positive int, got {self.attempt!r}")
        check_formats(self.table_format, self.value_format, self.value_schema)
        if (self.value_format == VALUE_SCHEMA) != (self.topic_schema is not None):
            raise ValueError("a job spec has topic_schema exactly when value_format is 'schema'")
        if self.topic_schema is not None:
            check_value_schema(self.topic_schema.value_ddl())
        check_table_name(self.plan.table, self.table_format)
        unknown = set(self.client_settings) - set(CLIENT_SETTINGS)
        if unknown:
            raise ValueError(f"client settings {sorted(unknown)} cannot be passed to the job; allowed: {CLIENT_SETTINGS}")

    def to_json(self) -> str:
        return json.dumps(
            {
                "plan": self.plan.to_dict(),
                "plan_topic": self.plan_topic,
                "service_url": self.service_url,
                "table_format": self.table_format,
                "value_format": self.value_format,
                "value_schema": self.value_schema,
                "read_timeout_seconds": self.read_timeout_seconds,
                "client_settings": self.client_settings,
                "auth": self.auth.to_dict(),
                "topic_schema": self.topic_schema.to_dict() if self.topic_schema is not None else None,
                "min_tasks": self.min_tasks,
                "attempt": self.attempt,
            },
            separators=(",", ":"),
        )

    def to_argument(self) -> str:
        """The spec as the job's command-line argument: its JSON compressed (zlib, base64).

        The plan names every partition, about 380 bytes of JSON each, and Linux refuses a
        command-line argument over 128 KiB: as JSON, a plan of some 340 partitions or more could
        not be submitted. Compressed, a plan of 1,024 partitions takes about 31 KB.
        """
        return ARGUMENT_PREFIX + base64.b64encode(zlib.compress(self.to_json().encode(), 9)).decode("ascii")

    @classmethod
    def from_argument(cls, text: str) -> IngestJobSpec:
        """Read the job's argument: as :meth:`to_argument` writes it, or plain JSON."""
        if text.startswith(ARGUMENT_PREFIX):
            text = zlib.decompress(base64.b64decode(text[len(ARGUMENT_PREFIX) :])).decode()
        return cls.from_json(text)

    @classmethod
    def from_json(cls, text: str) -> IngestJobSpec:
        body = json.loads(text)
        return cls(
            plan=IngestPlan.from_dict(body["plan"]),
            plan_topic=body["plan_topic"],
            service_url=body["service_url"],
            table_format=body["table_format"],
            value_format=body["value_format"],
            value_schema=body.get("value_schema"),
            read_timeout_seconds=float(body["read_timeout_seconds"]),
            client_settings=dict(body.get("client_settings") or {}),
            auth=JobAuth.from_dict(body.get("auth") or {}),
            topic_schema=TopicSchema.from_dict(body["topic_schema"]) if body.get("topic_schema") else None,
            min_tasks=int(body.get("min_tasks", 1)),
            attempt=int(body.get("attempt", 1)),
        )

    def client(self, files_dirs: Sequence[str] = ()) -> Client:
        """A client for the broker, authenticated from the files shipped with the job (looked for
        in ``files_dirs`` too, see :func:`.credentials.shipped_file`)."""
        return Client(self.service_url, **self.client_settings, **self.auth.client_kwargs(files_dirs))


_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}")


def is_table_path(table: str) -> bool:
    """A Delta table given by its location (``/data/events`` or ``s3a://bucket/events``), not its name."""
    return table.startswith("/") or "://" in table


def check_table_name(table: str, table_format: str = "parquet") -> None:
    """A table name is ``table``, ``database.table`` or ``catalog.database.table``, plain
    identifiers; a Delta table may be a location instead (see :func:`is_table_path`)."""
    if isinstance(table, str) and table_format == "delta" and is_table_path(table):
        return
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        where = ", or for delta an absolute path or URI" if table_format == "delta" else ""
        raise ValueError(
            f"table must be 'name', 'database.name' or 'catalog.database.name' of letters, digits and _{where}, got {table!r}"
        )


def check_formats(table_format: str, value_format: str, value_schema: str | None) -> None:
    """Reject combinations the job cannot write, naming what is wrong."""
    if table_format not in TABLE_FORMATS:
        raise ValueError(f"format must be one of {TABLE_FORMATS}, got {table_format!r}")
    if value_format not in VALUE_FORMATS:
        raise ValueError(f"value_format must be one of {VALUE_FORMATS}, got {value_format!r}")
    if value_format == VALUE_JSON and not (isinstance(value_schema, str) and value_schema.strip()):
        raise ValueError("value_format 'json' needs value_schema, a DDL string such as 'id BIGINT, name STRING'")
    if value_format != VALUE_JSON and value_schema is not None:
        raise ValueError(f"value_schema is only used with value_format 'json', not {value_format!r}")
    if table_format == "csv" and value_format == VALUE_BYTES:
        raise ValueError("the csv format cannot hold binary values; use value_format 'string' or 'json'")
    if table_format == "csv" and value_format == VALUE_SCHEMA:
        raise ValueError("the csv format cannot hold the struct, array and map columns a schema gives; use another format")
    if value_schema is not None:
        check_value_schema(value_schema)


def check_value_schema(value_schema: str) -> None:
    """Value fields (JSON's, a schema's) become columns next to the ones every row has: no name may be taken twice."""
    clashes = sorted(ROW_COLUMNS & set(top_level_names(value_schema)))
    if clashes:
        raise ValueError(f"value fields {clashes} clash with the columns every row has: rename them")


def top_level_names(ddl: str) -> list[str]:
    """The field names of a DDL field list (``a INT, b STRUCT<x: INT>`` gives ``a, b``)."""
    return [name.lower() for name, _ in top_level_fields(ddl)]


def top_level_fields(ddl: str) -> list[tuple[str, str]]:
    """(name, type) of each field of a DDL field list (``a INT, b STRUCT<x: INT>`` gives
    ``(a, INT), (b, STRUCT<x: INT>)``); names as written, without backquotes."""
    fields, depth, start = [], 0, 0
    for index, char in enumerate(ddl + ","):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            item = ddl[start:index].strip()
            if item:
                name, *kind = item.split(None, 1)
                fields.append((name.strip("`"), kind[0].strip() if kind else ""))
            start = index + 1
    return fields
