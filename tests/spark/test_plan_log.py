"""The plan log on the broker: where it stands after a job's report, and a report of an attempt
given up (a job that went on after its task died) passed over, in the run that reads it and in
the next one, which reads the log afresh."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.spark.job.plan import BatchOutcome, IngestPlan, PartitionPlan, Position, ReadRange
from airflow_pulsar.spark.job.records import ACKED, COMMITTED, PLANNED, PlanRecord, publish_record
from airflow_pulsar.spark.planning.plan_log import PlanLog

pytestmark = pytest.mark.one_broker

TOPIC = "persistent://public/default/t-partition-0"


def batch(start: int) -> tuple[IngestPlan, BatchOutcome]:
    after, last = Position(1, start), Position(1, start + 9)
    part = PartitionPlan(TOPIC, "t", 0, after, last, (ReadRange(TOPIC, 0, after, last),))
    return IngestPlan(f"batch-{start}", "sub", "events", (part,), sequence=start + 1), BatchOutcome({TOPIC: 10}, {TOPIC: last})


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[Client]:
    with Client(broker.service_url) as opened:
        yield opened


def test_a_report_counts_only_for_the_attempt_the_newest_plan_record_names(client: Client, topic_name: str) -> None:
    plans = f"persistent://public/default/{topic_name}"
    plan, outcome = batch(-1)
    log = PlanLog(client, plans, "sub", receive_timeout_seconds=5)
    assert log.latest() is None
    log.append(PlanRecord(PLANNED, plan, attempt=1))
    # Attempt 1's task died; attempt 2 is planned, its job reports, the batch is acknowledged.
    second = PlanRecord(PLANNED, plan, attempt=2)
    log.append(second)
    publish_record(client, plans, PlanRecord(COMMITTED, plan, outcome, 1))
    publish_record(client, plans, PlanRecord(COMMITTED, plan, outcome, 2))
    assert log.wait_for_report(second, 5) == PlanRecord(COMMITTED, plan, outcome, 2)
    acked = PlanRecord(ACKED, plan, outcome, 2)
    log.append(acked)
    # Attempt 1's job goes on and reports again, after the batch was acknowledged.
    publish_record(client, plans, PlanRecord(COMMITTED, plan, outcome, 1))
    assert log.latest() == acked
    log.close()

    rerun = PlanLog(client, plans, "sub", receive_timeout_seconds=5)
    assert rerun.latest() == acked
    # The next batch: the stale report is no answer to its first attempt either.
    following, ended = batch(9)
    planned = PlanRecord(PLANNED, following, attempt=1)
    rerun.append(planned)
    publish_record(client, plans, PlanRecord(COMMITTED, plan, outcome, 2))
    with pytest.raises(TimeoutError, match="no 'committed' record of batch batch-9 attempt 1"):
        rerun.wait_for_report(planned, 1)
    publish_record(client, plans, PlanRecord(COMMITTED, following, ended, 1))
    assert rerun.wait_for_report(planned, 5).batch_id == "batch-9"
    rerun.close()

    again = PlanLog(client, plans, "sub", receive_timeout_seconds=5)
    assert again.latest() == PlanRecord(COMMITTED, following, ended, 1)
    again.close()


def test_records_written_before_attempts_were_counted_read_as_attempt_0(client: Client, topic_name: str) -> None:
    plans = f"persistent://public/default/{topic_name}"
    plan, outcome = batch(-1)
    producer = client.create_producer(plans, batching_enabled=False)
    for state, with_outcome in ((PLANNED, False), (COMMITTED, True)):
        body = PlanRecord(state, plan, outcome if with_outcome else None).to_json().replace(b',"attempt":0', b"")
        assert b"attempt" not in body
        producer.send(body)
    producer.close()

    log = PlanLog(client, plans, "sub", receive_timeout_seconds=5)
    assert log.latest() == PlanRecord(COMMITTED, plan, outcome, 0)
    log.close()
