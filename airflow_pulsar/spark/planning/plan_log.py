"""The plan log: a topic on the broker that records each batch's plan and progress (the records
are described in :mod:`airflow_pulsar.spark.job.records`). The newest record the operator wrote,
and the job's report of the attempt it records, say what the next run must settle.

The log lives in Pulsar so that it is as durable as the messages it describes and is reachable
from any Airflow worker and from the Spark driver, wherever they run. It is read through a
durable Exclusive subscription named after the ingest subscription, which acknowledges every
record before the operator's newest one: Pulsar keeps unacknowledged messages, so that record and
what follows it are retained without a retention policy, and older ones can be trimmed.

Only the run holding the subscription writes ``planned`` and ``acked`` records; ``committed``
records come from Spark jobs, among them jobs of attempts given up since (a driver that went on
after its task was killed). A ``committed`` record counts only as the report of the attempt the
newest ``planned`` record names; any other is passed over.
"""

from __future__ import annotations

import logging
import time

from airflow_pulsar.client import Client, ConsumerType, InitialPosition, Message, Producer, Timeout
from airflow_pulsar.client.topic_name import InvalidTopicNameError, TopicName

from ..job.plan import Position
from ..job.records import COMMITTED, PlanRecord

log = logging.getLogger(__name__)


def default_plan_topic(topic: str, subscription: str) -> str:
    """``<subscription>-ingest-plans`` in the namespace of ``topic``."""
    name = TopicName.parse(topic)
    plan_topic = f"persistent://{name.tenant}/{name.namespace}/{subscription}-ingest-plans"
    try:
        TopicName.parse(plan_topic)
    except InvalidTopicNameError as exc:
        raise ValueError(f"subscription {subscription!r} does not make a valid plan topic name; pass plan_topic: {exc}") from None
    return plan_topic


class PlanLog:
    """The operator's side of the plan log: reads where the log stands, appends, waits for the job's report."""

    def __init__(self, client: Client, plan_topic: str, subscription: str, receive_timeout_seconds: float = 10):
        self.topic = str(TopicName.parse(plan_topic))
        self._client = client
        self._timeout_ms = int(receive_timeout_seconds * 1000)
        self._consumer = client.subscribe(
            self.topic,
            subscription,
            consumer_type=ConsumerType.Exclusive,
            initial_position=InitialPosition.Earliest,
            receiver_queue_size=100,
            ack_receipt_enabled=True,
        )
        self._producer: Producer | None = None
        # Where the log stands: the operator's newest record, or the report of its attempt.
        self._current: PlanRecord | None = None
        # The last message read: when the operator's next record follows, the log is acknowledged
        # through it.
        self._last: Message | None = None
        self._seen: Position | None = None

    def latest(self) -> PlanRecord | None:
        """Where the log stands, reading every record it holds past its subscription."""
        last, mark_delete = self._consumer.get_last_message_ids()[self.topic]
        if mark_delete is not None and Position.of(last) <= Position.of(mark_delete):
            return self._current
        self._receive_through(Position.of(last))
        return self._current

    def append(self, record: PlanRecord) -> None:
        """Write a record and read it back, so that the log stands there."""
        if self._producer is None:
            self._producer = self._client.create_producer(self.topic, batching_enabled=False)
        message_id = self._producer.send(record.to_json(), partition_key=record.batch_id)
        self._receive_through(Position.of(message_id))

    def wait_for_report(self, planned: PlanRecord, timeout_seconds: float) -> PlanRecord:
        """The Spark job's report of the attempt ``planned`` records, waiting for it."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            if self._current is not None and self._current.reports(planned):
                return self._current
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no {COMMITTED!r} record of batch {planned.batch_id} attempt {planned.attempt} in {self.topic} "
                    f"within {timeout_seconds:g} s"
                )
            try:
                self._take(self._consumer.receive(int(min(remaining, 1) * 1000) or 1))
            except Timeout:
                continue

    def _receive_through(self, position: Position) -> None:
        while self._seen is None or self._seen < position:
            try:
                self._take(self._consumer.receive(self._timeout_ms))
            except Timeout:
                raise TimeoutError(f"the plan log {self.topic} did not deliver its records up to {position}") from None

    def _take(self, message: Message) -> None:
        self._seen = Position.of(message.message_id())
        previous, self._last = self._last, message
        try:
            record = PlanRecord.from_json(message.data())
        except (ValueError, KeyError, TypeError) as exc:
            # Not ours: acknowledged with the rest, never taken for a plan.
            log.warning("skipping an unreadable record %s in %s: %s", message.message_id(), self.topic, exc)
            return
        current = self._current
        if record.state == COMMITTED:
            # Before the operator's newest record is read, the log stands wherever it was left.
            if current is not None and not record.reports(current):
                log.info(
                    "passing over the report of batch %s attempt %d in %s: the log stands at %s of batch %s attempt %d",
                    record.batch_id, record.attempt, self.topic, current.state, current.batch_id, current.attempt,
                )  # fmt: skip
                return
            self._current = record
            return
        if previous is not None:
            # Everything before the operator's newest record may go; it stays unacknowledged.
            self._consumer.acknowledge_cumulative(previous)
        self._current = record

    def close(self) -> None:
        """Close the producer and the subscription's consumer."""
        if self._producer is not None:
            self._producer.close()
        self._consumer.close()
