"""How a batch lands in a table of plain files (parquet, orc, json or csv): once, by whichever
attempt commits it first.

Spark's own write of a partition (an insert with dynamic partition overwrite) deletes the
partition's directory at the end of the job and moves its new files in, whatever is there: a job
that went on after its task died (a zombie) would replace, when it came to it, the batch another
attempt committed meanwhile, and between the delete and the move the batch would be missing.

So each attempt writes the batch's files with the table's format and options into a staging
directory of its own under the table's location, ``_ingest_staging/<batch id>-attempt-<n>``
(Spark and other readers of the table pass over names starting with ``_``), and commits them by
renaming that directory to the batch's partition directory ``batch_id=<batch id>``, a rename that
fails where that directory exists: on a local or mounted file system, POSIX's rename of a
directory onto one that is not empty; elsewhere Hadoop's ``FileContext.rename`` without
``OVERWRITE``, atomic on HDFS (object stores rename by copying, so a table there is better Delta
or Iceberg). The batch's partition is then added to the catalog. A batch whose partition
directory exists is in the table and is not written again. An attempt whose rename was refused
removes its staging directory; those that attempts which died left behind are removed by the
next batch's job, once their batch is in the table (the attempt, were it still running, would be
refused).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import unquote, urlparse

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession

from .columns import BATCH_ID
from .spec import IngestJobSpec

log = logging.getLogger("airflow_pulsar.spark.job")

STAGING = "_ingest_staging"


@dataclass(frozen=True)
class FileTable:
    """Where a catalog table of files keeps them (a URI) and the options it was created with."""

    location: str
    options: dict[str, str]

    @classmethod
    def of(cls, spark: SparkSession, table: str) -> FileTable:
        """The table as the session's catalog describes it."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        session = spark._jsparkSession
        identifier = session.sessionState().sqlParser().parseTableIdentifier(table)
        metadata = session.sessionState().catalog().getTableMetadata(identifier)
        options = dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(metadata.storage().properties()))
        options.pop("path", None)
        return cls(metadata.location().toString().rstrip("/"), options)

    def partition(self, batch_id: str) -> str:
        return f"{self.location}/{BATCH_ID}={batch_id}"

    def staging(self, batch_id: str, attempt: int) -> str:
        return f"{self.location}/{STAGING}/{batch_id}-attempt-{attempt}"


def write_files(spark: SparkSession, rows: DataFrame, spec: IngestJobSpec) -> bool:
    """Write the batch to a table of files unless the table holds it already, and only if no other
    attempt commits it first; whether this job committed it."""
    plan = spec.plan
    table = FileTable.of(spark, plan.table)
    files = file_system(spark, table.location)
    committed = False
    if files.exists(table.partition(plan.batch_id)):
        log.info("batch %s is in %s already: not writing it again", plan.batch_id, plan.table)
    else:
        staging = table.staging(plan.batch_id, spec.attempt)
        rows.drop(BATCH_ID).write.format(spec.table_format).options(**table.options).mode("overwrite").save(staging)
        committed = files.rename_if_absent(staging, table.partition(plan.batch_id))
        if not committed:
            log.info("batch %s was committed to %s by another attempt meanwhile: leaving it as it is", plan.batch_id, plan.table)
            files.remove(staging)
    spark.sql(f"ALTER TABLE {plan.table} ADD IF NOT EXISTS PARTITION ({BATCH_ID} = '{plan.batch_id}')")
    for name in files.names(f"{table.location}/{STAGING}"):
        batch_id = name.split("-attempt-")[0]
        if batch_id != plan.batch_id and files.exists(table.partition(batch_id)):
            files.remove(f"{table.location}/{STAGING}/{name}")
    return committed


class BatchFiles(Protocol):
    """What committing a batch needs of the file system a table is on (paths are URIs)."""

    def exists(self, uri: str) -> bool:
        """Whether a file or directory is there."""

    def rename_if_absent(self, source: str, target: str) -> bool:
        """Rename directory ``source`` to ``target`` in one step unless ``target`` exists; whether it was."""

    def names(self, directory: str) -> list[str]:
        """The names in ``directory``; none if it is missing."""

    def remove(self, uri: str) -> None:
        """Remove a directory and what it holds."""


class LocalFiles:
    """A table on this machine's file system (or one mounted here)."""

    @staticmethod
    def _path(uri: str) -> str:
        return unquote(urlparse(uri).path)

    def exists(self, uri: str) -> bool:
        return os.path.exists(self._path(uri))

    def rename_if_absent(self, source: str, target: str) -> bool:
        try:
            os.rename(self._path(source), self._path(target))
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return False
            raise
        return True

    def names(self, directory: str) -> list[str]:
        root = self._path(directory)
        return os.listdir(root) if os.path.isdir(root) else []

    def remove(self, uri: str) -> None:
        shutil.rmtree(self._path(uri), ignore_errors=True)


class HadoopFiles:
    """A table on a Hadoop file system (HDFS, an object store), through the driver's JVM."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None and spark.sparkContext._gateway is not None
        self._jvm = jvm
        conf = spark._jsc.hadoopConfiguration()
        self._fs = jvm.org.apache.hadoop.fs.Path(location).getFileSystem(conf)
        self._context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(self._fs.getUri(), conf)
        rename = getattr(jvm.org.apache.hadoop.fs, "Options$Rename")
        # FileContext.rename's options (Java varargs): none, so an existing target is refused.
        self._no_overwrite = spark.sparkContext._gateway.new_array(rename, 1)
        self._no_overwrite[0] = rename.NONE

    def exists(self, uri: str) -> bool:
        return bool(self._fs.exists(self._jvm.org.apache.hadoop.fs.Path(uri)))

    def rename_if_absent(self, source: str, target: str) -> bool:
        hadoop = self._jvm.org.apache.hadoop.fs
        try:
            self._context.rename(hadoop.Path(source), hadoop.Path(target), self._no_overwrite)
        except Py4JJavaError as exc:
            if exc.java_exception.getClass().getName() == "org.apache.hadoop.fs.FileAlreadyExistsException":
                return False
            raise
        return True

    def names(self, directory: str) -> list[str]:
        root = self._jvm.org.apache.hadoop.fs.Path(directory)
        return [status.getPath().getName() for status in self._fs.listStatus(root)] if self._fs.exists(root) else []

    def remove(self, uri: str) -> None:
        self._fs.delete(self._jvm.org.apache.hadoop.fs.Path(uri), True)


def file_system(spark: SparkSession, location: str) -> BatchFiles:
    """The files of the table at ``location``: local ones through the operating system, whose rename
    refuses an existing directory in one step (Hadoop's local file system checks first, and should
    the directory appear before it renames, copies the source into it)."""
    return LocalFiles() if urlparse(location).scheme in ("", "file") else HadoopFiles(spark, location)
