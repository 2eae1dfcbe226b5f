"""Tasks that publish through the PulsarHook the scheduler made at import (the plugins folder's
``pulsar_fork_state``), after the LocalExecutor forked it into their processes; each reports
where the hook was made, where it ran, and what the producer made before the fork said."""

from __future__ import annotations

from typing import Any

from airflow.sdk import dag, get_current_context, task


@task
def publish(index: int) -> dict[str, Any]:
    """Send one message on a producer of the inherited hook; try the inherited producer first."""
    import os

    import pulsar_fork_state as made_in_scheduler  # the forked copy: already imported

    from airflow_pulsar.client import AlreadyClosed

    try:
        made_in_scheduler.PRODUCER.send(b"inherited")
        refused = ""
    except AlreadyClosed as exc:
        refused = str(exc)
    hook = made_in_scheduler.HOOK
    producer = hook.create_producer(made_in_scheduler.TOPIC)
    message_id = producer.send(f"{get_current_context()['run_id']}:{index}".encode())
    producer.close()
    stats = hook.get_admin().topic_stats(made_in_scheduler.TOPIC)
    return {
        "made_in": made_in_scheduler.MADE_IN_PID,
        "ran_in": os.getpid(),
        "refused": refused,
        "message_id": str(message_id),
        "publishers": [publisher.get("producerName") for publisher in stats["publishers"]],
    }


@dag(dag_id="pulsar_forked_clients", schedule=None, catchup=False)
def pulsar_forked_clients() -> None:
    for index in range(3):
        publish.override(task_id=f"publish_{index}")(index)


pulsar_forked_clients()
