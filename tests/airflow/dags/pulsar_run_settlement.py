"""A DAG ending as runs of an ``acknowledge="on_success"`` watcher end: a handling task, then the
acknowledging task (all_success) and the releasing one (one_failed). ``dag_run.conf["fail"]``
makes the handling fail. Run by tests/airflow/test_run_acknowledgement.py."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_pulsar.operators.run_messages import PulsarAcknowledgeRunMessagesOperator, PulsarReleaseRunMessagesOperator

with DAG("pulsar_run_settlement", schedule=None, start_date=datetime(2025, 1, 1), catchup=False):

    @task
    def handle(dag_run=None) -> str:  # noqa: ANN001 - filled in by Airflow
        if dag_run.conf.get("fail"):
            raise RuntimeError("handling failed")
        return "handled"

    handled = handle()
    handled >> PulsarAcknowledgeRunMessagesOperator(task_id="acknowledge")
    handled >> PulsarReleaseRunMessagesOperator(task_id="release")
