"""The records of the plan log, and how the Spark job appends its report to it.

Every record is one JSON message: a batch's plan with its state, ``planned`` (written by the
operator before each submit of the Spark job), ``committed`` (written by the job once the table
holds the batch, with rows and ends per partition) or ``acked`` (written by the operator after
acknowledging), and the attempt it is about. Each submit of a batch is a new attempt: the operator
records ``planned`` with the next attempt number before it submits, and the job's ``committed``
record names the attempt it ran as, so that the report of an attempt that was given up (a job
that went on after its task died) is told from the current one's. The operator's side of the log
is :class:`~airflow_pulsar.spark.planning.plan_log.PlanLog`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .plan import BatchOutcome, IngestPlan

if TYPE_CHECKING:
    from airflow_pulsar.client import Client

PLANNED = "planned"
COMMITTED = "committed"
ACKED = "acked"
_STATES = (PLANNED, COMMITTED, ACKED)


@dataclass(frozen=True)
class PlanRecord:
    """One entry of the plan log."""

    state: str
    plan: IngestPlan
    outcome: BatchOutcome | None = None
    #: Which submit of the batch the record is about: 1 for the first, one more for each one
    #: after; 0 in records written before attempts were counted.
    attempt: int = 0

    def __post_init__(self) -> None:
        if self.state not in _STATES:
            raise ValueError(f"plan record state must be one of {_STATES}, got {self.state!r}")

    @property
    def batch_id(self) -> str:
        """The id of the batch the record is about."""
        return self.plan.batch_id

    def to_json(self) -> bytes:
        """The record as the message body."""
        body: dict[str, Any] = {"state": self.state, "plan": self.plan.to_dict(), "attempt": self.attempt}
        if self.outcome is not None:
            body["outcome"] = self.outcome.to_dict()
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PlanRecord:
        """Read a record from a message body."""
        body = json.loads(data)
        outcome = body.get("outcome")
        return cls(
            body["state"],
            IngestPlan.from_dict(body["plan"]),
            BatchOutcome.from_dict(outcome) if outcome else None,
            int(body.get("attempt", 0)),
        )

    def reports(self, planned: PlanRecord) -> bool:
        """Whether this is the job's report of the attempt ``planned`` records."""
        return (
            self.state == COMMITTED and planned.state == PLANNED
            and (self.batch_id, self.attempt) == (planned.batch_id, planned.attempt)
        )


def publish_record(client: Client, plan_topic: str, record: PlanRecord) -> None:
    """Append a record (the Spark job's side: it only writes); returns once the broker stored it."""
    producer = client.create_producer(plan_topic, batching_enabled=False)
    try:
        producer.send(record.to_json(), partition_key=record.batch_id)
    finally:
        producer.close()
