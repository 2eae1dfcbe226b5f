"""PulsarToTableOperator: ingest Pulsar topics into a table with Spark, acknowledging only what the
table holds, exactly once across crashes.

A run:

1. holds the subscription exclusively (see :class:`~airflow_pulsar.spark.planning.hold.SubscriptionHold`);
2. settles what the plan log says the previous run left unfinished: a batch that was planned
   but never reported is written again under the same batch id, as its next attempt (the write
   adds nothing if an earlier attempt committed it), a committed one that was not acknowledged
   is acknowledged;
3. plans the next batch from each partition's mark-delete position and newest entry, and
   records the plan in the plan log;
4. submits the Spark job through a ``SparkSubmitHook`` of its own, one per submit and attempt;
   the job writes the batch and reports rows and ends per partition to the plan log;
5. acknowledges each partition cumulatively through the batch's end, and records that.

A crash between any two steps leaves the plan log saying which of steps 4 and 5 to repeat. A job
whose task died and which goes on regardless (a zombie) cannot change the table once another
attempt committed the batch (each format's commit refuses it; see "Each batch lands once" in the
docs' Spark ingestion page), and its report, of an attempt given up, is passed over.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.common.compat.openlineage.utils.spark import (
    inject_parent_job_information_into_spark_properties,
    inject_transport_information_into_spark_properties,
)
from airflow.sdk import conf

from airflow_pulsar import arguments
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.spark.credentials import ShippedCredentials
from airflow_pulsar.spark.job.faults import inject
from airflow_pulsar.spark.job.plan import BatchOutcome, IngestPlan
from airflow_pulsar.spark.job.records import ACKED, PLANNED, PlanRecord
from airflow_pulsar.spark.job.spec import (
    CLIENT_SETTINGS,
    VALUE_SCHEMA,
    IngestJobSpec,
    check_formats,
    check_table_name,
)
from airflow_pulsar.spark.job.topic_schema import TopicSchema, registered_schema
from airflow_pulsar.spark.planning.hold import SubscriptionHold
from airflow_pulsar.spark.planning.plan_log import PlanLog, default_plan_topic
from airflow_pulsar.spark.planning.planner import ledger_layout, plan_batch
from airflow_pulsar.spark.planning.read_limits import max_read_positions
from airflow_pulsar.spark.submit import JobSubmit
from airflow_pulsar.spark.table_formats import (
    catalog_conf,
    default_exclude_packages,
    default_packages,
    session_conf,
    with_local_catalog,
)
from airflow_pulsar.templated_arguments import TemplatedArguments

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

# Every argument SparkSubmitHook takes passes through, but what to run, which the operator sets.
_SET_PER_SUBMIT = ("application_args", "java_class")
_HOOK_ARGUMENTS = tuple(name for name in inspect.signature(SparkSubmitHook.__init__).parameters if name not in ("self", *_SET_PER_SUBMIT))
# The Spark arguments rendered as templates (those SparkSubmitOperator renders).
_SPARK_TEMPLATED = tuple(
    name
    for name in (
        "conf", "files", "py_files", "jars", "driver_class_path", "packages", "exclude_packages", "keytab",
        "principal", "proxy_user", "name", "env_vars", "post_submit_commands", "properties_file",
    )
    if name in _HOOK_ARGUMENTS
)  # fmt: skip
# Ways of following a driver after spark-submit has returned; this operator waits for spark-submit.
_DETACHED_TRACKING = ("track_driver_via_k8s_api", "yarn_track_via_rm_api")


class PulsarToTableOperator(TemplatedArguments):
    """
    Write the backlog of a Pulsar subscription to a table with a Spark job, then acknowledge it.

    Each run writes one batch: every message after the subscription's position up to the newest
    one when the run started (or up to ``max_messages``). Rows carry ``key``, ``value`` (or the
    JSON fields), ``topic``, ``partition``, ``message_id``, ``publish_time``, ``event_time``,
    ``properties``, ``redelivery_count`` and ``batch_id``; the table is partitioned by
    ``batch_id``. The return value (XCom) gives the batch id, rows per topic partition and the
    acknowledged ranges.

    Spark settings are the arguments of the Spark provider's ``SparkSubmitHook`` (``conn_id``,
    ``conf``, ``executor_memory``, ``num_executors``, ``deploy_mode``, ...; templated as in
    ``SparkSubmitOperator``), plus its operator's OpenLineage switches. Every submit (settling an
    unfinished batch, then writing the new one) builds a hook of its own and waits for
    spark-submit, so ``track_driver_via_k8s_api`` and ``yarn_track_via_rm_api`` are refused.
    Without a Spark connection named ``conn_id`` the job runs on ``local[*]`` with this worker's
    Python; a connection to a ``spark://``, YARN or Kubernetes master runs it there unchanged (the
    job's code is shipped with ``--py-files``, or, in cluster mode on a standalone master, as the
    application jar that the worker fetches). The Pulsar connection's credentials, of any
    ``auth_method``, and its TLS files reach the job as files shipped with ``--files``, never on a
    command line (see the security page, "The Spark ingestion job").

    :param topics: A topic or a list of topics, partitioned or not. (templated)
    :param subscription: The subscription to consume; created at ``initial_position`` if new. (templated)
    :param table: The table, ``name`` or ``database.name``; created if missing. (templated)
    :param format: ``parquet`` (default), ``orc``, ``json`` or ``csv``; or ``delta`` or ``iceberg``,
        whose Spark integration comes from ``packages`` or ``jars`` (or ``spark.jars.packages`` /
        ``spark.jars`` in ``conf``), by default from ``packages`` naming the release for the Spark
        minor of this worker's pyspark (refused when the format has none for it), with
        ``exclude_packages`` leaving out what Spark already ships (unless given). A ``delta``
        table may be a location (an absolute path or URI) instead of a name. An ``iceberg`` table
        ``catalog.database.name`` lives in that Iceberg catalog (see ``table_catalog``), one named
        ``database.name`` in the Hive metastore, through Iceberg's session catalog.
    :param table_catalog: For ``iceberg``, the properties of the catalog a ``catalog.database.name``
        table names (e.g. ``{"type": "hadoop", "warehouse": "/data/lake"}``, values templated); None
        when ``conf`` configures it (``spark.sql.catalog.<catalog>...``).
    :param value_format: ``bytes`` (default), ``string`` (UTF-8), ``json``, or ``schema``: the
        fields of the topics' registered AVRO or JSON schema become typed columns (records become
        structs), read from the admin API at each submit; messages of older schema versions are
        read with their version, and a version's new fields become new nullable columns of the table.
    :param value_schema: For ``json`` values, the fields as a DDL string, e.g. ``"id BIGINT, name STRING"``.
    :param max_messages: At most this many messages per run, shared evenly by the partitions;
        whole entries (batches) only, at least one per partition. None: the whole backlog.
    :param min_partitions: Cut large partitions into sub-ranges so that at least this many Spark
        tasks read (without ``max_messages``). Ranges beyond twice Spark's default parallelism are
        read several to a task, but never by fewer tasks than this.
    :param pulsar_conn_id: The Pulsar connection. (templated)
    :param plan_topic: The plan log topic; default ``<subscription>-ingest-plans`` in the first
        topic's namespace. (templated)
    :param initial_position: Where a new subscription starts: ``Earliest`` (default) or ``Latest``
        (an ``InitialPosition``, or its name in any case).
    :param warehouse_dir: ``spark.sql.warehouse.dir`` for the Hive catalog; None leaves the cluster's.
    :param metastore_dir: Directory of a local Derby metastore (and ``derby.system.home``); None
        leaves the cluster's metastore settings (e.g. a metastore service).
    :param read_timeout_seconds: How long an executor waits for the next message of its range.
    :param report_timeout_seconds: How long to wait for the job's report after it succeeded.
    :param conn_id: The Spark connection.
    :param name: The Spark application's name; default ``pulsar-ingest-<subscription>``. (templated)
    :param openlineage_inject_parent_job_info: Add OpenLineage's parent job information to the
        Spark properties (default: the ``[openlineage] spark_inject_parent_job_info`` setting).
    :param openlineage_inject_transport_info: Add OpenLineage's transport information to the
        Spark properties (default: the ``[openlineage] spark_inject_transport_info`` setting).
    """

    template_fields: Sequence[str] = (
        *_SPARK_TEMPLATED,
        "topics",
        "subscription",
        "table",
        "table_catalog",
        "plan_topic",
        "warehouse_dir",
        "metastore_dir",
        "pulsar_conn_id",
    )
    # Spark arguments read by name; __init__ sets every one of _SPARK_TEMPLATED.
    conf: dict[str, Any] | None
    packages: str | None
    exclude_packages: str | None
    jars: str | None

    def __init__(
        self,
        *,
        topics: str | list[str],
        subscription: str,
        table: str,
        format: str = "parquet",
        table_catalog: dict[str, str] | None = None,
        value_format: str = "bytes",
        value_schema: str | None = None,
        max_messages: int | None = None,
        min_partitions: int = 1,
        pulsar_conn_id: str = PulsarHook.default_conn_name,
        plan_topic: str | None = None,
        initial_position: Any = "earliest",
        warehouse_dir: str | None = None,
        metastore_dir: str | None = None,
        read_timeout_seconds: float = 120,
        report_timeout_seconds: float = 60,
        conn_id: str = "spark_default",
        name: str | None = None,
        openlineage_inject_parent_job_info: bool | None = None,
        openlineage_inject_transport_info: bool | None = None,
        **kwargs: Any,
    ) -> None:
        check_formats(format, value_format, value_schema)
        if table_catalog is not None and format != "iceberg":
            raise ValueError(f"table_catalog configures an Iceberg catalog; format is {format!r}")
        if max_messages is not None and (isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1):
            raise ValueError(f"max_messages must be a positive int or None, got {max_messages!r}")
        if isinstance(min_partitions, bool) or not isinstance(min_partitions, int) or min_partitions < 1:
            raise ValueError(f"min_partitions must be a positive int, got {min_partitions!r}")
        for label, value in (("read_timeout_seconds", read_timeout_seconds), ("report_timeout_seconds", report_timeout_seconds)):
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{label} must be a positive number, got {value!r}")
        detached = [flag for flag in _DETACHED_TRACKING if kwargs.get(flag)]
        if detached:
            raise ValueError(f"{', '.join(detached)} cannot be used: the operator waits for spark-submit, once per submit of a run")
        spark = {key: kwargs.pop(key) for key in list(kwargs) if key in _HOOK_ARGUMENTS}
        super().__init__(**kwargs)
        for key in _SPARK_TEMPLATED:
            setattr(self, key, spark.pop(key, None))
        self.name = name
        self.conn_id = conn_id
        self.spark_options = spark
        self.topics = self._argument("topics", topics, arguments.topic_list)
        self.subscription = self._argument("subscription", subscription, arguments.non_empty_str)
        self.table_format = format
        self.table = self._argument("table", table, partial(_table_name, table_format=format))
        self.table_catalog = table_catalog
        self.value_format = value_format
        self.value_schema = value_schema
        self.max_messages = max_messages
        self.min_partitions = min_partitions
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)
        self.plan_topic = None if plan_topic is None else self._argument("plan_topic", plan_topic, arguments.topic_name)
        self.initial_position = arguments.initial_position(initial_position)
        self.warehouse_dir = warehouse_dir
        self.metastore_dir = metastore_dir
        self.read_timeout_seconds = float(read_timeout_seconds)
        self.report_timeout_seconds = float(report_timeout_seconds)
        self.openlineage_inject_parent_job_info = _setting(openlineage_inject_parent_job_info, "spark_inject_parent_job_info")
        self.openlineage_inject_transport_info = _setting(openlineage_inject_transport_info, "spark_inject_transport_info")
        self._running: JobSubmit | None = None

    # ---- the run ----

    def execute(self, context: Context) -> dict[str, Any]:
        """Settle the previous batch if needed, then plan, write and acknowledge the next one."""
        topics = list(self.topics)
        self.packages = default_packages(self.table_format, self.packages, self.jars, self.conf or {})
        self.exclude_packages = default_exclude_packages(self.table_format, self.packages, self.exclude_packages)
        if self.table_catalog is not None:
            catalog_conf(self.table, self.table_catalog)  # refuses a table or properties it cannot configure
        plan_topic = self.plan_topic or default_plan_topic(topics[0], self.subscription)
        hook = PulsarHook(self.pulsar_conn_id)
        try:
            client = hook.get_client()
            hold = SubscriptionHold(client, topics, self.subscription, self.initial_position)
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

    def on_kill(self) -> None:
        """Stop the Spark job being submitted, if any (how depends on the master and deploy mode)."""
        running = self._running
        if running is not None:
            running.kill()

    def _run(self, context: Context, hook: PulsarHook, hold: SubscriptionHold, plan_log: PlanLog) -> dict[str, Any]:
        latest = plan_log.latest()
        settled = self._settle(context, hook, hold, plan_log, latest)
        max_reads = max_read_positions(hook.get_admin(), hold.topics)  # before the states: see read_limits
        plan = plan_batch(
            hold.states(),
            self.subscription,
            self.table,
            min_partitions=self.min_partitions,
            max_messages=self.max_messages,
            ledgers_of=lambda topic: ledger_layout(hook.get_admin(), topic),
            previous=latest.plan if latest is not None else None,
            max_reads=max_reads,
        )
        if plan is None:
            self.log.info(
                "Subscription %r has no backlog on %s: nothing to ingest, no Spark job submitted.",
                self.subscription,
                ", ".join(hold.topics),
            )
            self._run_summary: dict[str, Any] = {
                "batch_id": None,
                "skipped": True,
                "table": self.table,
                "total_rows": 0,
                "rows": {},
                "ranges": [],
                "settled": settled,
            }
            return self._run_summary
        self._log_plan(plan)
        report = self._write(context, hook, PlanRecord(PLANNED, plan, attempt=1), plan_log)
        self._acknowledge(hold, plan_log, report)
        outcome = report.outcome
        assert outcome is not None
        self._run_summary = {**batch_summary(plan, outcome), "skipped": False, "settled": settled}
        if self.value_format == VALUE_SCHEMA:
            self._run_summary["value_columns"] = self._value_columns
        return self._run_summary

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
            attempt = record.attempt + 1
            self.log.info(
                "Batch %s was planned but not committed: writing it again under the same batch id, as attempt %d.", plan.batch_id, attempt
            )
            report = self._write(context, hook, PlanRecord(PLANNED, plan, attempt=attempt), plan_log)
        else:
            self.log.info("Batch %s is in the table but was not fully acknowledged: acknowledging it.", plan.batch_id)
            report = record
        self._acknowledge(hold, plan_log, report)
        assert report.outcome is not None
        return {**batch_summary(plan, report.outcome), "was": record.state}

    def _write(self, context: Context, hook: PulsarHook, planned: PlanRecord, plan_log: PlanLog) -> PlanRecord:
        """Record the attempt ``planned``, submit the Spark job for it and return its report."""
        plan = planned.plan
        plan_log.append(planned)
        config = hook.config
        credentials = ShippedCredentials.of(config)
        topic_schema = self._topic_schema(hook, plan) if self.value_format == VALUE_SCHEMA else None
        spec = IngestJobSpec(
            plan=plan,
            plan_topic=plan_log.topic,
            service_url=config.service_url,
            table_format=self.table_format,
            value_format=self.value_format,
            value_schema=self.value_schema,
            read_timeout_seconds=self.read_timeout_seconds,
            client_settings={k: v for k, v in config.client_kwargs().items() if k in CLIENT_SETTINGS},
            auth=credentials.auth,
            topic_schema=topic_schema,
            min_tasks=self.min_partitions,
            attempt=planned.attempt,
        )
        self.log.info(
            "Submitting the Spark job for batch %s attempt %d (%d ranges) to write %s.",
            plan.batch_id, planned.attempt, len(plan.ranges), plan.table,
        )  # fmt: skip
        self._submit(context, spec.to_argument(), credentials)
        try:
            record = plan_log.wait_for_report(planned, self.report_timeout_seconds)
        except TimeoutError as exc:
            # A standalone cluster's spark-submit exits with 0 whatever became of the driver.
            raise RuntimeError(
                f"the Spark job of batch {plan.batch_id} ended without reporting it ({exc}): it failed or could not reach "
                "the broker; see the driver's log (in cluster deploy mode, on its Spark worker)"
            ) from exc
        assert record.outcome is not None
        for topic, rows in record.outcome.rows.items():
            self.log.info("Batch %s wrote %d rows of %s.", plan.batch_id, rows, topic)
        return record

    def _topic_schema(self, hook: PulsarHook, plan: IngestPlan) -> TopicSchema:
        """The topics' newest registered schema, read after planning: every planned message was written with it or an older version."""
        schema = registered_schema(hook.get_admin(), list(dict.fromkeys(part.source_topic for part in plan.partitions)))
        self.log.info("Value columns from the %s schema version %d: %s", schema.kind, schema.version, schema.value_ddl())
        self._value_columns = schema.value_ddl()
        return schema

    def _acknowledge(self, hold: SubscriptionHold, plan_log: PlanLog, report: PlanRecord) -> None:
        """Acknowledge every partition through the end of the batch ``report`` reports, then record it."""
        plan, outcome = report.plan, report.outcome
        assert outcome is not None
        inject("before-ack")
        for index, part in enumerate(plan.partitions):
            end = outcome.ends.get(part.topic, part.mark_delete)
            if end > part.mark_delete:
                hold.acknowledge_through(part.topic, end)
                self.log.info("Acknowledged %s through %s.", part.topic, end)
            if index == 0:
                inject("mid-ack")
        plan_log.append(PlanRecord(ACKED, plan, outcome, report.attempt))
        self.log.info("Batch %s: %d rows in %s, acknowledged.", plan.batch_id, outcome.total_rows, plan.table)

    # ---- one submit ----

    def _submit(self, context: Context, spec_argument: str, credentials: ShippedCredentials) -> None:
        """Run spark-submit for one batch with a hook of its own; returns once the job succeeded."""
        arguments: dict[str, Any] = {
            **self.spark_options,
            **{key: getattr(self, key) for key in _SPARK_TEMPLATED},
            "name": self.name or f"pulsar-ingest-{self.subscription}",
            "conn_id": self.conn_id,
            "conf": self._job_conf(context),
        }
        submit = JobSubmit(arguments, spec_argument, credentials)
        self._running = submit
        try:
            submit.run()
        finally:
            self._running = None

    # ---- helpers ----

    def _log_plan(self, plan: IngestPlan) -> None:
        self.log.info(
            "Planned batch %s for %s: %d partitions, %d ranges.", plan.batch_id, plan.table, len(plan.partitions), len(plan.ranges)
        )
        for part in plan.partitions:
            budget = f", at most {part.message_budget} messages" if part.budgeted else ""
            self.log.info("  %s: after %s through %s in %d range(s)%s", part.topic, part.mark_delete, part.last, len(part.ranges), budget)

    def _job_conf(self, context: Context) -> dict[str, Any]:
        conf = session_conf(self.table_format, dict(self.conf or {}))
        if self.table_catalog is not None:
            conf = {**catalog_conf(self.table, self.table_catalog), **conf}
        if self.openlineage_inject_parent_job_info:
            conf = inject_parent_job_information_into_spark_properties(conf, context)
        if self.openlineage_inject_transport_info:
            conf = inject_transport_information_into_spark_properties(conf, context)
        return with_local_catalog(conf, self.table_format, self.warehouse_dir, self.metastore_dir)

    # ---- OpenLineage (called by the OpenLineage provider's listener when it is installed) ----

    def get_openlineage_facets_on_start(self) -> OperatorLineage:
        """The topics read and the table written (with the schema of its rows), as OpenLineage datasets."""
        from airflow_pulsar import lineage

        return lineage.ingest_lineage(self)

    def get_openlineage_facets_on_complete(self, task_instance: object) -> OperatorLineage:
        """As on start, with the rows this run wrote to the table (from its XCom summary, which
        ``execute`` keeps on the operator: the listener may call this in a forked process)."""
        from airflow_pulsar import lineage

        return lineage.ingest_lineage(self, getattr(self, "_run_summary", None))


def _table_name(value: Any, name: str, table_format: str) -> str:
    """The table argument, checked as the job reads it for its format."""
    check_table_name(value, table_format)
    return value


def _setting(value: bool | None, key: str) -> bool:
    """An OpenLineage switch: as given, or else Airflow's ``[openlineage]`` setting."""
    return conf.getboolean("openlineage", key, fallback=False) if value is None else value


def batch_summary(plan: IngestPlan, outcome: BatchOutcome) -> dict[str, Any]:
    """The XCom of a written batch: its id, table and rows, and each partition's range and rows."""
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
