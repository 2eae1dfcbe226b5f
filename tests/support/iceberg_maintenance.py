"""Table maintenance of an Iceberg table, as a scheduled maintenance job runs it between ingests:
compact the data files (a new snapshot), then expire every snapshot but the current one.

:func:`compact_and_expire` runs this file with spark-submit on local Spark; the file is the job.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone


def compact_and_expire(table: str, catalog_properties: dict[str, str]) -> None:
    """Compact ``catalog.database.name`` and expire its older snapshots, in a Spark job of its own."""
    # Imported here: the job that runs this file has neither on its path.
    from airflow_pulsar.spark.table_formats import EXTENSIONS, catalog_conf
    from jvm.lakehouse_jars import lakehouse_jars

    conf = {
        **catalog_conf(table, catalog_properties),
        "spark.sql.extensions": EXTENSIONS["iceberg"],
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
    }
    jars = lakehouse_jars("iceberg")
    assert jars is not None
    command = ["spark-submit", "--master", "local[1]", "--jars", jars]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    done = subprocess.run([*command, __file__, table], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _maintain(table: str) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    catalog, database, name = table.split(".")
    spark.sql(f"CALL {catalog}.system.rewrite_data_files(table => '{database}.{name}', options => map('rewrite-all', 'true'))")
    # Every snapshot older than a second from now, which is all but the current one.
    later = (datetime.now(timezone.utc) + timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S")
    spark.sql(f"CALL {catalog}.system.expire_snapshots(table => '{database}.{name}', older_than => TIMESTAMP '{later}', retain_last => 1)")
    spark.stop()


if __name__ == "__main__":
    _maintain(sys.argv[1])
