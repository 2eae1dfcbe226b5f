"""PulsarToTableOperator: ingest Pulsar topics into a table with Spark, acknowledging only what the
table holds, exactly once across crashes.

A run:

1. holds the subscription exclusively (see :class:`~airflow_pulsar.spark.hold.SubscriptionHold`);
2. settles what the plan log says the previous run left unfinished: a batch that was planned
   but never committed is written again under the same batch id (the write replaces the
   batch's table partition), a committed one that was not acknowledged is acknowledged;
3. plans the next batch from each partition's mark-delete position and newest entry, and
   records the plan in the plan log;
4. submits the Spark job through the Spark provider's ``SparkSubmitHook``; the job writes the
   batch and reports rows and ends per partition to the plan log;
5. acknowledges each partition cumulatively through the batch's end, and records that.

A crash between any two steps leaves the plan log saying which of steps 4 and 5 to repeat.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from airflow_pulsar.client import InitialPosition
from airflow_pulsar.client.admin import AdminError
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.spark.archive import build_job_archive
from airflow_pulsar.spark.faults import inject
from airflow_pulsar.spark.hold import SubscriptionHold
from airflow_pulsar.spark.plan import BatchOutcome, IngestPlan
from airflow_pulsar.spark.plan_log import ACKED, COMMITTED, PLANNED, PlanLog, PlanRecord, default_plan_topic
from airflow_pulsar.spark.planner import plan_batch
from airflow_pulsar.spark.spec import (
    CLIENT_SETTINGS,
    JAR_FORMATS,
    TOKEN_ENV,
    IngestJobSpec,
    check_formats,
    check_table_name,
)

try:
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # pragma: no cover - Airflow 2.x layout
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[no-redef]
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef]

if TYPE_CHECKING:
    from airflow.sdk import Context

LOCAL_MASTER = "local[*]"
_POSITIONS = {"earliest": InitialPosition.Earliest, "latest": InitialPosition.Latest}


class PulsarToTableOperator(SparkSubmitOperator):
    """
    Write the backlog of a Pulsar subscription to a table with a Spark job, then acknowledge it.

    Each run writes one batch: every message after the subscription's position up to the newest
    one when the run started (or up to ``max_messages``). Rows carry ``key``, ``value`` (or the
    JSON fields), ``topic``, ``partition``, ``message_id``, ``publish_time``, ``event_time``,
    ``properties``, ``redelivery_count`` and ``batch_id``; the table is partitioned by
    ``batch_id``. The return value (XCom) gives the batch id, rows per topic partition and the
    acknowledged ranges.

    Spark settings (``conn_id``, ``conf``, ``executor_memory``, ``num_executors``, ...) are
    those of ``SparkSubmitOperator``. Without a Spark connection named ``conn_id`` the job runs
    on ``local[*]`` with this worker's Python; a connection to a ``spark://``, YARN or Kubernetes
    master runs it there unchanged (the job's code is shipped with ``--py-files``).

    :param topics: A topic or a list of topics, partitioned or not. (templated)
    :param subscription: The subscription to consume; created at ``initial_position`` if new. (templated)
    :param table: The table, ``name`` or ``database.name``; created if missing. (templated)
    :param format: ``parquet`` (default), ``orc``, ``json`` or ``csv``; ``delta`` or ``iceberg``
        when their jars reach the cluster (``packages``, ``jars`` or the matching
        ``spark.sql.extensions``).
    :param value_format: ``bytes`` (default), ``string`` (UTF-8) or ``json``.
    :param value_schema: For ``json`` values, the fields as a DDL string, e.g. ``"id BIGINT, name STRING"``.
    :param max_messages: At most this many messages per run, shared evenly by the partitions;
        whole entries (batches) only, at least one per partition. None: the whole backlog.
    :param min_partitions: Cut large partitions into sub-ranges so that at least this many Spark
        tasks read (without ``max_messages``).
    :param pulsar_conn_id: The Pulsar connection.
    :param plan_topic: The plan log topic; default ``<subscription>-ingest-plans`` in the first
        topic's namespace.
    :param initial_position: Where a new subscription starts: ``earliest`` (default) or ``latest``.
    :param warehouse_dir: ``spark.sql.warehouse.dir`` for the Hive catalog; None leaves the cluster's.
    :param metastore_dir: Directory of a local Derby metastore (and ``derby.system.home``); None
        leaves the cluster's metastore settings (e.g. a metastore service).
    :param read_timeout_seconds: How long an executor waits for the next message of its range.
    :param report_timeout_seconds: How long to wait for the job's report after it succeeded.
    """

    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "topics",
        "subscription",
        "table",
        "plan_topic",
        "warehouse_dir",
        "metastore_dir",
    )

    def __init__(
        self,
        *,
        topics: str | list[str],
        subscription: str,
        table: str,
        format: str = "parquet",
        value_format: str = "bytes",
        value_schema: str | None = None,
        max_messages: int | None = None,
        min_partitions: int = 1,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        plan_topic: str | None = None,
        initial_position: str = "earliest",
        warehouse_dir: str | None = None,
        metastore_dir: str | None = None,
        read_timeout_seconds: float = 120,
        report_timeout_seconds: float = 60,
        conn_id: str = "spark_default",
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        check_formats(format, value_format, value_schema)
        if max_messages is not None and (isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1):
            raise ValueError(f"max_messages must be a positive int or None, got {max_messages!r}")
        if isinstance(min_partitions, bool) or not isinstance(min_partitions, int) or min_partitions < 1:
            raise ValueError(f"min_partitions must be a positive int, got {min_partitions!r}")
        if initial_position not in _POSITIONS:
            raise ValueError(f"initial_position must be 'earliest' or 'latest', got {initial_position!r}")
        for label, value in (("read_timeout_seconds", read_timeout_seconds), ("report_timeout_seconds", report_timeout_seconds)):
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        job = importlib.util.find_spec("airflow_pulsar.spark.job")
        assert job is not None and job.origin is not None
        super().__init__(application=job.origin, conn_id=conn_id, name=name or f"pulsar-ingest-{subscription}", **kwargs)
        self.topics = topics
        self.subscription = subscription
        self.table = table
        self.table_format = format
        self.value_format = value_format
        self.value_schema = value_schema
        self.max_messages = max_messages
        self.min_partitions = min_partitions
        self.pulsar_conn_id = pulsar_conn_id
        self.plan_topic = plan_topic
        self.initial_position = initial_position
        self.warehouse_dir = warehouse_dir
        self.metastore_dir = metastore_dir
        self.read_timeout_seconds = float(read_timeout_seconds)
        self.report_timeout_seconds = float(report_timeout_seconds)
        self._spark_conn_id = conn_id

    # ---- the run ----

    def execute(self, context: Context) -> dict[str, Any]:
        """Settle the previous batch if needed, then plan, write and acknowledge the next one."""
        topics = [self.topics] if isinstance(self.topics, str) else list(self.topics)
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise ValueError(f"topics must be a topic name or a non-empty list of them, got {self.topics!r}")
        if not isinstance(self.subscription, str) or not self.subscription:
            raise ValueError(f"subscription must be a non-empty str, got {self.subscription!r}")
        check_table_name(self.table)
        self._check_table_format_jars()
        plan_topic = self.plan_topic or default_plan_topic(topics[0], self.subscription)
        hook = PulsarHook(self.pulsar_conn_id)
        try:
            client = hook.get_client()
            hold = SubscriptionHold(client, topics, self.subscription, _POSITIONS[self.initial_position])
            try:
                plan_log = PlanLog(client, plan_topic, self.subscription)
                try:
                    return self._run(context, hook, hold, plan_log)
                finally:
                    plan_log.close()
            finally:
                hold.close()
        finally:
            hook.close()

    def _run(self, context: Context, hook: PulsarHook, hold: SubscriptionHold, plan_log: PlanLog) -> dict[str, Any]:
        settled = self._settle(context, hook, hold, plan_log, plan_log.latest())
        plan = plan_batch(
            hold.states(),
            self.subscription,
            self.table,
            min_partitions=self.min_partitions,
            max_messages=self.max_messages,
            ledgers_of=lambda topic: self._ledger_layout(hook, topic),
        )
        if plan is None:
            self.log.info(
                "Subscription %r has no backlog on %s: nothing to ingest, no Spark job submitted.",
                self.subscription,
                ", ".join(hold.topics),
            )
            return {"batch_id": None, "skipped": True, "table": self.table, "total_rows": 0, "rows": {}, "ranges": [], "settled": settled}
        self._log_plan(plan)
        plan_log.append(PlanRecord(PLANNED, plan))
        outcome = self._write(context, hook, plan, plan_log)
        self._acknowledge(hold, plan_log, plan, outcome)
        return {**_summary(plan, outcome), "skipped": False, "settled": settled}

    def _settle(
        self, context: Context, hook: PulsarHook, hold: SubscriptionHold, plan_log: PlanLog, record: PlanRecord | None
    ) -> dict[str, Any] | None:
        """Finish the batch the newest plan record left open; its summary, or None if none was."""
        if record is None or record.state == ACKED:
            return None
        plan = record.plan
        if plan.table != self.table:
            raise ValueError(
                f"batch {plan.batch_id} of subscription {self.subscription!r} was planned for table {plan.table!r} and is "
                f"unfinished; finish it with table={plan.table!r} before writing to {self.table!r}"
            )
        missing = sorted({p.topic for p in plan.partitions} - set(hold.topics))
        if missing:
            raise ValueError(f"unfinished batch {plan.batch_id} covers partitions this run does not hold: {missing}")
        if record.state == PLANNED:
            states = {state.topic: state for state in hold.states()}
            moved = [p.topic for p in plan.partitions if states[p.topic].mark_delete != p.mark_delete]
            if moved:
                raise RuntimeError(
                    f"batch {plan.batch_id} was planned but not committed, and meanwhile subscription "
                    f"{self.subscription!r} moved on {moved}: something else acknowledged its messages"
                )
            self.log.info("Batch %s was planned but not committed: writing it again under the same batch id.", plan.batch_id)
            outcome = self._write(context, hook, plan, plan_log)
        else:
            assert record.outcome is not None
            self.log.info("Batch %s is in the table but was not fully acknowledged: acknowledging it.", plan.batch_id)
            outcome = record.outcome
        self._acknowledge(hold, plan_log, plan, outcome)
        return {**_summary(plan, outcome), "was": record.state}

    def _write(self, context: Context, hook: PulsarHook, plan: IngestPlan, plan_log: PlanLog) -> BatchOutcome:
        """Submit the Spark job for ``plan`` and return what it reported."""
        config = hook.config
        spec = IngestJobSpec(
            plan=plan,
            plan_topic=plan_log.topic,
            service_url=config.service_url,
            table_format=self.table_format,
            value_format=self.value_format,
            value_schema=self.value_schema,
            read_timeout_seconds=self.read_timeout_seconds,
            client_settings={k: v for k, v in config.client_kwargs().items() if k in CLIENT_SETTINGS},
        )
        local = self._spark_master_is_local()
        with tempfile.TemporaryDirectory(prefix="pulsar-ingest-") as workdir:
            archive = str(build_job_archive(Path(workdir)))
            submitted = (self.py_files, self.conf, self.env_vars)
            self.py_files = ",".join(filter(None, [archive, self.py_files]))
            self.conf = self._job_conf()
            self.env_vars = self._job_env(config.token, local)
            self.application_args = ["--spec", spec.to_json()]
            self._hook = None  # one hook per submit: it keeps the command it was built with
            self.log.info("Submitting the Spark job for batch %s (%d ranges) to write %s.", plan.batch_id, len(plan.ranges), plan.table)
            try:
                super().execute(context)
            finally:
                self.py_files, self.conf, self.env_vars = submitted
                self._hook = None
        record = plan_log.wait_for(plan.batch_id, COMMITTED, self.report_timeout_seconds)
        assert record.outcome is not None
        outcome = record.outcome
        for topic, rows in outcome.rows.items():
            self.log.info("Batch %s wrote %d rows of %s.", plan.batch_id, rows, topic)
        return outcome

    def _acknowledge(self, hold: SubscriptionHold, plan_log: PlanLog, plan: IngestPlan, outcome: BatchOutcome) -> None:
        """Acknowledge every partition through the batch's end, then record it."""
        inject("before-ack")
        for index, part in enumerate(plan.partitions):
            end = outcome.ends.get(part.topic, part.mark_delete)
            if end > part.mark_delete:
                hold.acknowledge_through(part.topic, end)
                self.log.info("Acknowledged %s through %s.", part.topic, end)
            if index == 0:
                inject("mid-ack")
        plan_log.append(PlanRecord(ACKED, plan, outcome))
        self.log.info("Batch %s: %d rows in %s, acknowledged.", plan.batch_id, outcome.total_rows, plan.table)

    def _get_hook(self) -> SparkSubmitHook:
        _spark_submit_on_path()
        with _local_master_if_undefined(self._spark_conn_id):
            return super()._get_hook()

    # ---- helpers ----

    def _log_plan(self, plan: IngestPlan) -> None:
        self.log.info(
            "Planned batch %s for %s: %d partitions, %d ranges.", plan.batch_id, plan.table, len(plan.partitions), len(plan.ranges)
        )
        for part in plan.partitions:
            budget = f", at most {part.message_budget} messages" if part.budgeted else ""
            self.log.info("  %s: after %s through %s in %d range(s)%s", part.topic, part.mark_delete, part.last, len(part.ranges), budget)

    def _ledger_layout(self, hook: PulsarHook, topic: str) -> list[tuple[int, int]]:
        """A partition's ledgers from the admin API's internal stats; empty if unavailable."""
        try:
            stats = hook.get_admin().internal_stats(topic)
        except AdminError as exc:
            self.log.warning("No ledger layout of %s (%s): its range is read by one task.", topic, exc)
            return []
        return [(int(ledger["ledgerId"]), int(ledger["entries"])) for ledger in stats.get("ledgers", [])]

    def _check_table_format_jars(self) -> None:
        """delta and iceberg need their Spark integration on the cluster; say so before submitting."""
        group = JAR_FORMATS.get(self.table_format)
        if group is None:
            return
        conf = self.conf or {}
        named = (self.packages, self.jars, conf.get("spark.jars.packages"), conf.get("spark.jars"), conf.get("spark.sql.extensions"))
        mentions = " ".join(str(value) for value in named if value)
        if group not in mentions and self.table_format not in mentions.lower():
            raise ValueError(
                f"format {self.table_format!r} needs its Spark jars ({group}): pass packages=, jars= or conf "
                "spark.jars.packages / spark.sql.extensions naming them"
            )

    def _spark_master_is_local(self) -> bool:
        try:
            connection = BaseHook.get_connection(self._spark_conn_id)
        except AirflowNotFoundException:
            return True
        return (connection.host or "").startswith("local")

    def _job_conf(self) -> dict[str, Any]:
        conf = dict(self.conf or {})
        if self.warehouse_dir:
            conf.setdefault("spark.sql.warehouse.dir", self.warehouse_dir)
        if self.metastore_dir:
            metastore = Path(self.metastore_dir)
            conf.setdefault(
                "spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={metastore / 'metastore_db'};create=true"
            )
            options = conf.get("spark.driver.extraJavaOptions", "")
            conf["spark.driver.extraJavaOptions"] = f"{options} -Dderby.system.home={metastore}".strip()
        return conf

    def _job_env(self, token: str | None, local: bool) -> dict[str, Any] | None:
        env = dict(self.env_vars or {})
        if token:
            env[TOKEN_ENV] = token
        if local:
            # Driver and executors run here: with this interpreter, which has the job's imports.
            env.setdefault("PYSPARK_PYTHON", sys.executable)
        return env or None


def _summary(plan: IngestPlan, outcome: BatchOutcome) -> dict[str, Any]:
    return {
        "batch_id": plan.batch_id,
        "table": plan.table,
        "total_rows": outcome.total_rows,
        "rows": dict(outcome.rows),
        "ranges": [
            {
                "topic": part.topic,
                "partition": part.partition,
                "after": str(part.mark_delete),
                "through": str(outcome.ends.get(part.topic, part.mark_delete)),
                "rows": outcome.rows.get(part.topic, 0),
                "spark_ranges": [[str(r.after), str(r.last)] for r in part.ranges],
            }
            for part in plan.partitions
        ],
    }


def _spark_submit_on_path() -> None:
    """The Spark provider runs ``spark-submit`` from the PATH; a virtualenv that was not activated
    has pyspark's one next to its ``python`` only, so put that directory on this task's PATH."""
    beside_python = Path(sys.executable).with_name("spark-submit")
    if shutil.which("spark-submit") is None and beside_python.exists():
        os.environ["PATH"] = os.pathsep.join((str(beside_python.parent), os.environ.get("PATH", "")))


@contextmanager
def _local_master_if_undefined(conn_id: str) -> Iterator[None]:
    """Without a connection ``conn_id``, SparkSubmitHook would pick YARN: offer it local[*] instead,
    as a connection in the environment (Airflow's own lookup), for the time the hook is built."""
    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        pass
    else:
        yield
        return
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    os.environ[variable] = json.dumps({"conn_type": "spark", "host": LOCAL_MASTER})
    try:
        yield
    finally:
        os.environ.pop(variable, None)
