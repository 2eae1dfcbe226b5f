"""Which Airflow task instance ran each ingest batch: the ingest operator returns the batch id in
its XCom, so the metadata database links a batch to its DAG run and task once the task finished."""

from __future__ import annotations

from collections.abc import Iterable

from airflow_pulsar.ui.batches import RunLink

INGEST_OPERATOR = "PulsarToTableOperator"
# The newest ingest results looked at: enough for the batches a page lists.
RESULTS_READ = 500


def batch_runs(dag_ids: Iterable[str]) -> dict[str, RunLink]:
    """The task instance of each batch id, from the return values of the ingest tasks of ``dag_ids``."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import and_, select

    dag_ids = list(dag_ids)
    if not dag_ids:
        return {}
    query = (
        select(XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.map_index, XComModel.value)
        .join(
            TaskInstance,
            and_(
                TaskInstance.dag_id == XComModel.dag_id,
                TaskInstance.run_id == XComModel.run_id,
                TaskInstance.task_id == XComModel.task_id,
                TaskInstance.map_index == XComModel.map_index,
            ),
        )
        .where(XComModel.key == "return_value", TaskInstance.operator == INGEST_OPERATOR, XComModel.dag_id.in_(dag_ids))
        .order_by(XComModel.timestamp.desc())
        .limit(RESULTS_READ)
    )
    links: dict[str, RunLink] = {}
    with create_session() as session:
        for dag_id, run_id, task_id, map_index, stored in session.execute(query):
            value = XComModel.deserialize_value(_Stored(stored))
            batch_id = value.get("batch_id") if isinstance(value, dict) else None
            if isinstance(batch_id, str) and batch_id not in links:
                links[batch_id] = RunLink(dag_id, run_id, task_id, map_index)
    return links


class _Stored:
    """A stored XCom value in the shape ``XComModel.deserialize_value`` reads (a row with ``value``)."""

    def __init__(self, value: object) -> None:
        self.value = value
