"""A PulsarHook made at import in Airflow's scheduler, used by tasks that the LocalExecutor runs in
forked processes: a real scheduler, dag-processor, triggerer and api-server (LocalExecutor), with
forked_workers/ as the DAGs and plugins folders.

The scheduler imports the plugins folder as it starts, and through it the package
forked_workers/plugins/pulsar_fork_state, which makes the hook, connects its client and admin and
opens a producer; the LocalExecutor forks its
workers from the scheduler, and each worker's supervisor forks the task process. The tasks publish
through the inherited hook's client and admin, the inherited producer refuses with the fix named,
and the scheduler's own producer is still on the broker afterwards: nothing in the forked
processes closed it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_pulsar.client import Client, MessageId
from airflow_pulsar.client.admin import PulsarAdmin
from tests.deployment.conftest import airflow_deployment
from tests.support.airflow_deployment import AirflowDeployment

pytestmark = pytest.mark.timeout(900)

FOLDERS = Path(__file__).resolve().parent / "forked_workers"
DAG_ID = "pulsar_forked_clients"
TOPIC = "persistent://public/default/forked-workers"
TASKS = 3


@pytest.fixture(scope="module")
def forked_workers(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowDeployment]:
    with airflow_deployment(broker, tmp_path_factory.mktemp("airflow-forks"), FOLDERS / "dags", FOLDERS / "plugins") as airflow:
        yield airflow


def _published(service_url: str, run_id: str) -> set[str]:
    """The messages of this run on the topic, read from the start."""
    found = set()
    with Client(service_url) as client:
        reader = client.create_reader(TOPIC, MessageId.earliest)
        while reader.has_message_available():
            text = reader.read_next(10_000).data().decode()
            if text.startswith(f"{run_id}:"):
                found.add(text)
    return found


def test_tasks_publish_through_the_hook_the_scheduler_made_before_forking_them(forked_workers: AirflowDeployment, broker: Any) -> None:
    airflow = forked_workers
    airflow.unpause(DAG_ID)
    run_id = airflow.trigger(DAG_ID)
    airflow.finished(DAG_ID, run_id, 300)

    scheduler_pid = airflow.processes["scheduler"].pid
    scheduler_producer = (airflow.home / f"producer-{scheduler_pid}.txt").read_text()
    for index in range(TASKS):
        outcome = airflow.xcom(DAG_ID, run_id, f"publish_{index}")
        assert outcome["made_in"] == scheduler_pid != outcome["ran_in"], outcome
        assert "forked" in outcome["refused"] and "Open it again in this process" in outcome["refused"], outcome
        assert scheduler_producer in outcome["publishers"]
    assert _published(broker.service_url, run_id) == {f"{run_id}:{index}" for index in range(TASKS)}
    # The scheduler's producer outlived the tasks that inherited it.
    with PulsarAdmin(broker.web_url) as admin:
        publishers = [publisher.get("producerName") for publisher in admin.topic_stats(TOPIC)["publishers"]]
    assert scheduler_producer in publishers
