"""The quick options of the Spark JVMs the tests start, and the class-data-sharing archive of a
Spark driver of this environment that they name (``make spark-cds``).

- The C1 compiler only and the serial collector: on a busy 2-core machine a short-lived Spark JVM
  starts about twice as fast, and none of them runs long enough to gain from C2.
- The archive, when it is there as the tests start (``jvm/class_sharing.py``): mapping its classes
  takes a local Spark driver about 5 s of CPU less.

``python jvm/spark_cds.py`` makes the archive: one spark-submit of this file on local[*] with
``-XX:ArchiveClassesAtExit``, whose driver does what the ingest job's driver does (a Hive
metastore in Derby, a Python data source, JSON parsing, a partitioned parquet table written and
counted), so the archive holds the classes such a driver loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jvm.class_sharing import JVM_CACHE, dump_archive, sharing_options

CHECKOUT = Path(__file__).resolve().parents[1]
# The Makefile's $(SPARK_CDS).
ARCHIVE = JVM_CACHE / "spark-driver.jsa"
QUICK_START = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUICK_JVM_OPTIONS = " ".join([QUICK_START, *sharing_options(ARCHIVE)])


def train(work: Path) -> None:
    """The driver's work, run inside spark-submit (imports pyspark, which only the driver needs)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class NumbersReader(DataSourceReader):
        def read(self, partition: Any) -> Iterator[tuple[int, str]]:
            for number in range(100):
                yield number, f'{{"id": {number}, "name": "n{number}"}}'

    class Numbers(DataSource):
        @classmethod
        def name(cls) -> str:
            return "numbers"

        def schema(self) -> str:
            return "offset BIGINT, value STRING"

        def reader(self, schema: Any) -> DataSourceReader:
            return NumbersReader()

    spark = (
        SparkSession.builder.enableHiveSupport()
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={work / 'metastore_db'};create=true")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .getOrCreate()
    )
    try:
        spark.dataSource.register(Numbers)
        rows = (
            spark.read.format("numbers")
            .load()
            .withColumn("parsed", F.from_json("value", "id BIGINT, name STRING"))
            .select("offset", "parsed.*", F.lit("b1").alias("batch_id"))
        )
        spark.sql("CREATE DATABASE IF NOT EXISTS training")
        rows.write.format("parquet").partitionBy("batch_id").saveAsTable("training.numbers")
        counted = spark.table("training.numbers").groupBy("batch_id").count().collect()
        assert counted[0]["count"] == 100, counted
    finally:
        spark.stop()


def dump() -> None:
    """Run the training driver under spark-submit and leave its archive at ``ARCHIVE``."""
    spark_submit = Path(sys.executable).with_name("spark-submit")

    def submit(archive_option: str) -> None:
        with tempfile.TemporaryDirectory(prefix="spark-cds-") as work:
            # Its temp directory too, which Hive's session would leave a directory in.
            env = {
                **os.environ,
                "SPARK_SUBMIT_OPTS": f"{QUICK_START} {archive_option} -Dderby.system.home={work} -Djava.io.tmpdir={work}",
                "PYSPARK_PYTHON": sys.executable,
                # This file runs as the driver's script: the checkout's root makes its jvm package importable.
                "PYTHONPATH": os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")])),
            }
            command = [
                str(spark_submit), "--master", "local[*]", "--conf", "spark.ui.enabled=false",
                "--conf", "spark.sql.shuffle.partitions=2", __file__, "--train", work,
            ]  # fmt: skip
            result = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise SystemExit(f"the Spark training run failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}")

    dump_archive(ARCHIVE, submit)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--train":
        train(Path(sys.argv[2]))
    elif len(sys.argv) == 1:
        dump()
    else:
        raise SystemExit("usage: python jvm/spark_cds.py")
