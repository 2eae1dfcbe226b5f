"""Spark SQL on an Iceberg table, in a Spark job of its own on local Spark (spark-submit runs this
file): the queries a reader of the docs runs, and the table maintenance a scheduled job runs between
ingests (compact the data files, a new snapshot, then expire every snapshot but the current one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone


def iceberg_sql(table: str, catalog_properties: dict[str, str], statements: list[str]) -> list[list[str]]:
    """Run ``statements`` in a session whose Iceberg catalog holds ``catalog.database.name``; the
    rows of the last one, each value as Spark SQL's shell prints it."""
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
    done = subprocess.run([*command, __file__, json.dumps(statements)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def compact_and_expire(table: str, catalog_properties: dict[str, str]) -> None:
    """Compact ``catalog.database.name`` and expire its older snapshots."""
    catalog, database, name = table.split(".")
    # Every snapshot older than a second from now, which is all but the current one.
    later = (datetime.now(timezone.utc) + timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S")
    iceberg_sql(table, catalog_properties, [
        f"CALL {catalog}.system.rewrite_data_files(table => '{database}.{name}', options => map('rewrite-all', 'true'))",
        f"CALL {catalog}.system.expire_snapshots(table => '{database}.{name}', older_than => TIMESTAMP '{later}', retain_last => 1)",
    ])


def _run(statements: list[str]) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    rows: list[list[str]] = []
    for statement in statements:
        rows = [[str(value) for value in row] for row in spark.sql(statement).collect()]
    spark.stop()
    print(json.dumps(rows))


if __name__ == "__main__":
    _run(json.loads(sys.argv[1]))
