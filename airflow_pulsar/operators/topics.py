"""PulsarCreateTopicOperator: create a topic, partitioned or not, through Pulsar's admin REST API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_pulsar import arguments
from airflow_pulsar.client.admin import AdminConflictError, PulsarAdmin
from airflow_pulsar.hooks.pulsar import PulsarHook
from airflow_pulsar.templated_arguments import TemplatedArguments


def _create_topic(admin: PulsarAdmin, topic: str, partitions: int) -> bool:
    """Create a topic with ``partitions`` partitions (0: non-partitioned); False when it exists
    with that many already, ValueError when it exists partitioned otherwise."""
    try:
        if partitions:
            admin.create_partitioned_topic(topic, partitions)
        else:
            admin.create_topic(topic)
    except AdminConflictError:
        existing = admin.partition_count(topic)
        if existing != partitions:
            have = f"{existing} partitions" if existing else "no partitions"
            raise ValueError(f"topic {topic} already exists with {have}, not {partitions}") from None
        return False
    return True


class PulsarCreateTopicOperator(TemplatedArguments):
    """
    Create a persistent topic; idempotent.

    A topic that already exists with the partitions asked for is left as it is and the task
    succeeds, saying so in its log; one that exists partitioned otherwise (a partitioned topic
    asked for non-partitioned, or a different count) fails the task, naming both counts.
    Returns ``{"topic", "partitions", "created"}`` to XCom.

    :param topic: The topic. Templated.
    :param partitions: The number of partitions; 0 (default) for a non-partitioned topic.
    :param pulsar_conn_id: The Pulsar connection (its admin URL and token are used). Templated.

    Example::

        PulsarCreateTopicOperator(task_id="orders_topic", topic="orders", partitions=4)
    """

    template_fields: Sequence[str] = ("topic", "pulsar_conn_id")
    ui_color = "#e8f0ff"

    def __init__(
        self, *, topic: str, partitions: int = 0, pulsar_conn_id: str = PulsarHook.default_conn_name, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.topic = self._argument("topic", topic, arguments.topic_name)
        self.partitions = arguments.positive_int(partitions, "partitions", minimum=0)
        self.pulsar_conn_id = self._argument("pulsar_conn_id", pulsar_conn_id, arguments.non_empty_str)

    def execute(self, context: Any) -> dict[str, Any]:
        """Create the topic unless it exists."""
        topic = self.topic
        with PulsarHook(pulsar_conn_id=self.pulsar_conn_id) as hook:
            created = _create_topic(hook.get_admin(), topic, self.partitions)
        shape = f"{self.partitions} partitions" if self.partitions else "non-partitioned"
        if created:
            self.log.info("Created topic %s (%s)", topic, shape)
        else:
            self.log.info("Topic %s already exists (%s): left as it is", topic, shape)
        return {"topic": topic, "partitions": self.partitions, "created": created}
