"""PulsarToTableOperator in a real DAG run (dag.test()): templated arguments, a message cap shared by
the partitions, the XCom a downstream task reads, and the backlog left for the next run.

What it checks is the operator's, the same on either broker: it runs on Apache Pulsar in the main
suite and on the embedded broker in the dependency-range tiers (`make test-ranges`)."""

from __future__ import annotations

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client.admin import PulsarAdmin
from tests.support.spark_ingest import Catalog, DagRuns, produce_json

pytestmark = pytest.mark.one_broker


def test_a_dag_run_ingests_at_most_max_messages_and_returns_the_ranges(
    pulsar_default: BrokerProcess, spark_test_dags: object, catalog: Catalog, topic_name: str
) -> None:
    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 4)
        produce_json(pulsar_default.service_url, topic_name, 0, 4_000, batch=50)
        dag = spark_test_dags.get_dag("pulsar_to_table")  # type: ignore[attr-defined]

        xcoms = DagRuns(dag, {"topic": topic_name, "warehouse": str(catalog.warehouse), "metastore": str(catalog.metastore)}).run()

        summary = xcoms["ingest"]
        # 1000 shared as 250 per partition, taken in whole entries of at most 50 messages.
        assert 800 < summary["total_rows"] <= 1_000
        assert all(200 < n <= 250 for n in summary["rows"].values()) and len(summary["rows"]) == 4
        assert xcoms["report"] == f"{summary['total_rows']} rows in batch {summary['batch_id']}"
        for span in summary["ranges"]:
            assert span["rows"] == summary["rows"][span["topic"]]
            assert span["after"].endswith(":-1") and len(span["spark_ranges"]) == 1
            cursor = admin.internal_stats(span["topic"])["cursors"]["dag-ingest"]
            assert cursor["markDeletePosition"] == span["through"]
        assert admin.message_backlog(topic_name, "dag-ingest").messages == 4_000 - summary["total_rows"]
    assert catalog.rows("dag_events").num_rows == summary["total_rows"]
