"""PulsarToTableOperator in a real DAG run (dag.test()): templated arguments, a message cap shared by
the partitions, the XCom a downstream task reads, and the backlog left for the next run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.standalone.process import BrokerProcess
from spark_helpers import Catalog, produce_json

DAGS = Path(__file__).parent / "dags"


@pytest.fixture
def spark_test_dags(monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> object:
    """The DAGs of tests/spark/dags as a second DAG bundle next to the DAGs folder: dag.test()
    finds a DAG through the bundles."""
    from airflow.dag_processing.dagbag import DagBag

    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
        {"name": "spark-tests", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {"path": str(DAGS)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    bag = DagBag(dag_folder=DAGS)
    assert not bag.import_errors, bag.import_errors
    return bag


def test_a_dag_run_ingests_at_most_max_messages_and_returns_the_ranges(
    pulsar_default: BrokerProcess, spark_test_dags: object, catalog: Catalog, topic_name: str
) -> None:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with PulsarAdmin(pulsar_default.web_url) as admin:
        admin.create_partitioned_topic(topic_name, 4)
        produce_json(pulsar_default.service_url, topic_name, 0, 4_000, batch=50)
        dag = spark_test_dags.get_dag("pulsar_to_table")  # type: ignore[attr-defined]

        run = dag.test(run_conf={"topic": topic_name, "warehouse": str(catalog.warehouse), "metastore": str(catalog.metastore)})

        assert str(run.state) == "success"
        with create_session() as session:
            rows = session.scalars(XComModel.get_many(run_id=run.run_id, key="return_value", dag_ids="pulsar_to_table"))
            xcoms = {row.task_id: XComModel.deserialize_value(row) for row in rows}
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
