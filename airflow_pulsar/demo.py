"""``make demo``: the scheduled-ingestion example end to end on one machine.

It starts the embedded broker, creates the ``shop-events`` topic (4 partitions) and the
``lakehouse`` subscription, produces sample shop events with the bundled client, then runs the
``pulsar_shop_events_ingest`` DAG with ``airflow dags test``: the deferred backlog sensor fires,
the Spark job (local[*]) writes the events to the ``shop.events`` table and the subscription is
acknowledged. It prints the backlog before and after, the table's rows per partition as Spark SQL
reads them back (``spark-sql``), and where the table and the logs are; then it stops the broker.

``--format delta|iceberg`` (``make demo FORMAT=delta``) writes a Delta or Iceberg table instead of
parquet, with the jars ``make`` resolved into the checkout's ``.jvm/`` cache.

``--broker pulsar`` (``make demo BROKER=pulsar``) runs the same flow on Apache Pulsar standalone
from the checkout's JVM cache instead of the embedded broker.

Everything lives under ``var/demo/`` (wiped at the start of each run): the broker's data and log,
the Airflow home, the Spark warehouse and metastore, and the DAG run's log.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import airflow_pulsar.client as pulsar
from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.cli.command_line import CommandParser
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.examples.shop_events import TABLE_FORMAT_ENV, TABLE_FORMATS
from airflow_pulsar.spark.table_formats import session_conf, with_local_catalog

DEMO_DIR = Path("var/demo")
CHECKOUT = Path(__file__).resolve().parents[1]
DAGS_DIR = CHECKOUT / "dags"
DAG_ID = "pulsar_shop_events_ingest"
TOPIC = "persistent://public/default/shop-events"
SUBSCRIPTION = "lakehouse"
EVENTS = 20_000
READ_BACK = "SELECT partition, count(*) FROM shop.events GROUP BY partition ORDER BY partition"


class DemoBroker(Protocol):
    """What the demo uses of a running broker: the embedded one or Apache Pulsar standalone."""

    @property
    def service_url(self) -> str: ...

    @property
    def web_url(self) -> str: ...

    @property
    def log_path(self) -> Path: ...

    def stop(self) -> int: ...


def _produce(service_url: str, count: int) -> int:
    """Publish ``count`` generated shop events, keyed by user, with the DAGs' own generator;
    returns how many the broker acknowledged."""
    from airflow_pulsar.examples import shop_events

    acknowledged = []

    def receipt(result: pulsar.Result, message_id: pulsar.MessageId | None) -> None:
        if result == pulsar.Result.Ok:
            acknowledged.append(message_id)

    with pulsar.Client(service_url, operation_timeout_seconds=30) as client:
        producer = client.create_producer(
            TOPIC, batching_enabled=True, compression_type=pulsar.CompressionType.LZ4, block_if_queue_full=True
        )
        for key, value, properties in shop_events.generate(count, seed=2024):
            producer.send_async(value.encode(), receipt, partition_key=key, properties=properties)
        producer.flush()
    return len(acknowledged)


def _airflow_env(broker: DemoBroker, home: Path, table_format: str) -> dict[str, str]:
    """An Airflow installation under ``home`` whose DAGs folder is dags/ and whose
    ``pulsar_default`` connection is the demo broker; no Spark connection, so Spark runs local[*]."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_PULSAR_EXAMPLES_DIR": str(DEMO_DIR.resolve()),
        TABLE_FORMAT_ENV: table_format,
        "AIRFLOW_CONN_PULSAR_DEFAULT": json.dumps(
            {"conn_type": "pulsar", "host": broker.service_url, "extra": {"admin_url": broker.web_url}}
        ),
    }


def _airflow(env: dict[str, str], log: Path, *args: str) -> str:
    """Run the venv's ``airflow`` CLI, its output appended to ``log``; raise if it fails."""
    airflow = str(Path(sys.executable).with_name("airflow"))
    result = subprocess.run([airflow, *args], env=env, capture_output=True, text=True)
    with log.open("a") as file:
        file.write(f"$ airflow {' '.join(args)}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0 or ("dags" in args and "state=success" not in result.stdout + result.stderr):
        raise RuntimeError(f"airflow {' '.join(args)} failed; see {log.resolve()}")
    return result.stdout + result.stderr


def _spark_sql(table_format: str, jars: str | None, query: str) -> list[list[str]]:
    """Run ``query`` with the ``spark-sql`` shell on local Spark over the demo's catalog (the
    settings the ingest job had) and return its result rows as lists of fields."""
    import pyspark

    conf = with_local_catalog(
        session_conf(table_format, {"spark.ui.enabled": "false"}),
        table_format,
        str((DEMO_DIR / "warehouse").resolve()),
        str((DEMO_DIR / "metastore").resolve()),
    )
    command = [str(Path(sys.executable).with_name("spark-sql")), "--master", "local[2]", *(["--jars", jars] if jars else [])]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    spark_home = str(Path(pyspark.__file__).parent)
    result = subprocess.run([*command, "-e", query], env={**os.environ, "SPARK_HOME": spark_home}, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"spark-sql failed reading the table:\n{result.stderr[-2000:]}")
    return [line.split("\t") for line in result.stdout.splitlines() if line.strip()]


def _backlog(admin: PulsarAdmin) -> tuple[int, str]:
    """The subscription's backlog in messages (a batch of n counts n), and how it was counted."""
    backlog = admin.message_backlog(TOPIC, SUBSCRIPTION)
    return backlog.messages, f"{'exact' if backlog.exact else 'estimated'}, {backlog.entries} entries"


def _start_broker(kind: str) -> DemoBroker:
    """The embedded broker, or Apache Pulsar standalone (``jvm/apache_pulsar.py`` of the checkout)."""
    if kind == "embedded":
        return BrokerProcess(DEMO_DIR / "broker").start()
    from jvm.apache_pulsar import PulsarStandalone

    return PulsarStandalone((DEMO_DIR / "pulsar").resolve(), log_level="warn").start()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo and print what happened; exits non-zero if the table or the backlog is wrong."""
    parser = CommandParser(prog="airflow-pulsar demo", description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=("embedded", "pulsar"), default="embedded", help="the broker to run the demo on")
    parser.add_argument("--format", choices=TABLE_FORMATS, default="parquet", help="the format of the shop.events table")
    args = parser.parse_args(argv)
    if not (DAGS_DIR / f"{DAG_ID}.py").exists():
        print(f"airflow-pulsar demo: the example DAGs are not at {DAGS_DIR}: run it from a checkout of the project", file=sys.stderr)
        return 1
    try:  # the checkout's JVM helpers, beside its cache: importable from the checkout's root
        from jvm.lakehouse_jars import LakehouseJarsMissing, lakehouse_jars
    except ModuleNotFoundError as missing:
        if missing.name != "jvm":
            raise
        print(f"airflow-pulsar demo: run it from the checkout's root ({CHECKOUT}): make demo", file=sys.stderr)
        return 1

    try:
        jars = lakehouse_jars(args.format)
    except LakehouseJarsMissing as missing:
        print(f"airflow-pulsar demo: {missing}", file=sys.stderr)
        return 1
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir(parents=True)
    log = DEMO_DIR / "demo.log"
    started = time.monotonic()
    broker = _start_broker(args.broker)
    name = "Apache Pulsar" if args.broker == "pulsar" else "broker"
    print(f"{name} running: {broker.service_url} (admin {broker.web_url})")
    try:
        with PulsarAdmin(broker.web_url) as admin:
            admin.create_partitioned_topic(TOPIC, 4)
            admin.create_subscription(TOPIC, SUBSCRIPTION, pulsar.InitialPosition.Earliest)
            produced = _produce(broker.service_url, EVENTS)
            print(f"produced {produced} shop events to {TOPIC} (4 partitions)")
            before, counted = _backlog(admin)
            print(f"backlog of '{SUBSCRIPTION}' before: {before} messages ({counted})")

            env = _airflow_env(broker, (DEMO_DIR / "airflow").resolve(), args.format)
            print(f"running the ingestion DAG ({args.format} table): airflow dags test {DAG_ID} ...", flush=True)
            _airflow(env, log, "db", "migrate")
            output = _airflow(env, log, "dags", "test", DAG_ID, *(["--conf", json.dumps({"jars": jars})] if jars else []))
            for line in output.splitlines():  # the report task's own lines
                if line.startswith(("backlog when", "batch ", "  persistent://")):
                    print(f"  | {line}")

            print(f"reading it back: spark-sql -e \"{READ_BACK}\"", flush=True)
            rows = {f"{TOPIC}-partition-{partition}": int(count) for partition, count in _spark_sql(args.format, jars, READ_BACK)}
            print(f"table shop.events holds {sum(rows.values())} rows:")
            for partition, count in rows.items():
                print(f"  {partition}: {count} rows")
            after, counted = _backlog(admin)
            print(f"backlog of '{SUBSCRIPTION}' after: {after} messages ({counted})")
        ok = sum(rows.values()) == produced == before == EVENTS and after == 0
        print(f"demo {'OK' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s")
        print(f"table: {(DEMO_DIR / 'warehouse' / 'shop.db' / 'events').resolve()} ({args.format}, partitioned by batch_id)")
        print(f"logs: {log.resolve()} (Airflow), {broker.log_path.resolve()} (broker)")
        return 0 if ok else 1
    finally:
        broker.stop()
        print("broker stopped")


if __name__ == "__main__":
    sys.exit(main())
