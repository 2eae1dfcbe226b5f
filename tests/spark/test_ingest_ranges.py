"""The ingest's broker side without Spark, against the broker process: internal stats, the exclusive
hold, the plan log, and reading ranges into Arrow record batches."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pytest

from airflow_pulsar.broker.process import BrokerProcess
from airflow_pulsar.client import Client
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.spark.job import source
from airflow_pulsar.spark.job.columns import RowBatchBuilder, decode_json, json_parse_schema
from airflow_pulsar.spark.job.plan import IngestPlan, Position
from airflow_pulsar.spark.job.records import ACKED, COMMITTED, PLANNED, PlanRecord, publish_record
from airflow_pulsar.spark.job.source import RangeReadError, arrow_schema, read_range_batches
from airflow_pulsar.spark.planning.hold import SubscriptionBusy, SubscriptionHold
from airflow_pulsar.spark.planning.plan_log import PlanLog
from airflow_pulsar.spark.planning.planner import plan_batch
from airflow_pulsar.spark.planning.read_limits import max_read_positions
from tests.support.spark_ingest import BYTES_ROWS


@pytest.fixture
def our_client(broker: BrokerProcess):
    """Our client on the module's broker."""
    with Client(broker.service_url) as c:
        yield c


@pytest.fixture
def admin(broker: BrokerProcess):
    with PulsarAdmin(broker.web_url) as a:
        yield a


def produce(client: Client, topic: str, count: int, batch: int) -> None:
    """``count`` messages in entries of ``batch`` (batch 1: no batching)."""
    producer = client.create_producer(topic, batching_enabled=batch > 1, batching_max_messages=batch, batching_max_publish_delay_ms=1000)
    for i in range(count):
        producer.send_async(b"m%d" % i, None, partition_key=f"k{i}", properties={"i": str(i)}, event_timestamp=1000 + i)
    producer.flush()
    producer.close()


def test_internal_stats_give_ledgers_and_cursor_positions(our_client: Client, admin: PulsarAdmin, topic_name: str) -> None:
    produce(our_client, topic_name, 30, 10)  # three entries
    consumer = our_client.subscribe(topic_name, "stats", initial_position=1)
    received = [consumer.receive(5000) for _ in range(30)]
    consumer.acknowledge_cumulative(received[9])  # entry 0
    for message in received[20:]:  # entry 2, individually
        consumer.acknowledge(message)
    consumer.close()

    stats = admin.internal_stats(topic_name)

    ledger = received[0].message_id().ledger_id()
    assert stats["lastConfirmedEntry"] == f"{ledger}:2"
    assert stats["currentLedgerEntries"] == 3 and stats["numberOfEntries"] == 3
    assert stats["ledgers"] == [{"ledgerId": ledger, "entries": 0, "size": 0, "offloaded": False, "underReplicated": False}]
    cursor = stats["cursors"]["stats"]
    assert cursor["markDeletePosition"] == f"{ledger}:0"
    assert cursor["individuallyDeletedMessages"] == f"[({ledger}:1..{ledger}:2]]"


def test_the_hold_reports_positions_acknowledges_and_excludes_others(our_client: Client, admin: PulsarAdmin, topic_name: str) -> None:
    admin.create_partitioned_topic(topic_name, 2)
    produce(our_client, topic_name, 40, 5)

    with SubscriptionHold(our_client, [topic_name], "hold") as hold:
        states = hold.states()
        assert [s.partition for s in states] == [0, 1]
        assert all(s.mark_delete.entry_id == -1 and s.last > s.mark_delete for s in states)
        with pytest.raises(SubscriptionBusy, match="'hold' .* is held by another consumer"):
            SubscriptionHold(our_client, [topic_name], "hold")
        sub = admin.partitioned_stats(topic_name)["subscriptions"]["hold"]
        assert sub["msgOutCounter"] == 0 and sub["unackedMessages"] == 0  # nothing is delivered to a hold
        first = states[0]
        hold.acknowledge_through(first.topic, first.last)
        hold.acknowledge_through(first.topic, first.mark_delete)  # behind the mark-delete: no change
        assert admin.internal_stats(first.topic)["cursors"]["hold"]["markDeletePosition"] == str(first.last)
        backlog = admin.backlog(topic_name, "hold")
        assert backlog.partitions[0].msg_backlog == 0 and backlog.partitions[1].msg_backlog > 0
        assert hold.states()[0].empty
    with SubscriptionHold(our_client, [topic_name], "hold") as again:  # released on close
        assert again.states()[0].mark_delete == first.last


def test_a_broker_without_transactions_gives_no_max_read_positions(our_client: Client, admin: PulsarAdmin, topic_name: str) -> None:
    produce(our_client, topic_name, 3, 1)
    assert max_read_positions(admin, [f"persistent://public/default/{topic_name}"]) == {}


def test_the_plan_log_keeps_the_newest_record_for_the_next_run(our_client: Client, admin: PulsarAdmin, topic_name: str) -> None:
    plan_topic = f"{topic_name}-plans"
    plan = IngestPlan("b1", "sub", "t", ())
    planned = PlanRecord(PLANNED, plan, attempt=1)
    log = PlanLog(our_client, plan_topic, "sub")
    assert log.latest() is None
    log.append(planned)
    with Client(our_client.service_url.url) as job_client:  # the Spark driver's side
        publish_record(job_client, plan_topic, PlanRecord(COMMITTED, plan, attempt=1))
    assert log.wait_for_report(planned, 10).state == COMMITTED
    with pytest.raises(TimeoutError, match="no 'committed' record of batch b1 attempt 2"):
        log.wait_for_report(replace(planned, attempt=2), 0.3)
    log.close()

    next_run = PlanLog(our_client, plan_topic, "sub")
    latest = next_run.latest()
    assert latest is not None and latest.state == COMMITTED and latest.batch_id == "b1"
    next_run.append(PlanRecord(ACKED, plan, attempt=1))
    next_run.close()
    # Everything but the newest record is acknowledged: the backlog holds exactly one.
    assert admin.backlog(plan_topic, "sub").msg_backlog == 1
    third = PlanLog(our_client, plan_topic, "sub")
    assert third.latest().state == ACKED
    third.close()


def read_all(client: Client, plan: IngestPlan) -> pa.Table:
    arrow = arrow_schema(BYTES_ROWS)
    batches = []
    for read_range in plan.ranges:
        builder = RowBatchBuilder(arrow, "bytes", "src", read_range.partition, plan.batch_id)
        batches += list(read_range_batches(client, read_range, builder, 10))
    return pa.Table.from_batches(batches, arrow)


@pytest.mark.parametrize("batch", [1, 7], ids=["unbatched", "batched"])
def test_cut_ranges_read_every_message_once(our_client: Client, topic_name: str, batch: int) -> None:
    produce(our_client, topic_name, 100, batch)
    with SubscriptionHold(our_client, [topic_name], "read") as hold:
        plan = plan_batch(hold.states(), "read", "t", min_partitions=4)
    assert plan is not None and len(plan.ranges) == 4

    rows = read_all(our_client, plan)

    assert sorted(rows.column("value").to_pylist()) == sorted(b"m%d" % i for i in range(100))
    first = rows.slice(0, 1).to_pylist()[0]
    assert first["key"] == "k0" and first["properties"] == [("i", "0")] and first["topic"] == "src"
    assert first["event_time"].timestamp() == 1.0 and first["partition"] == -1 and first["batch_id"] == plan.batch_id
    indexes = set(rows.column("message_id").combine_chunks().field("batch_index").to_pylist())
    assert indexes == ({-1} if batch == 1 else set(range(7)))


def test_a_range_is_yielded_in_batches_of_the_batch_size(our_client: Client, topic_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(source, "ROWS_PER_BATCH", 10)
    produce(our_client, topic_name, 25, 7)  # entries of 7: batches cut across entries and takes
    with SubscriptionHold(our_client, [topic_name], "slices") as hold:
        plan = plan_batch(hold.states(), "slices", "t")
    assert plan is not None
    builder = RowBatchBuilder(arrow_schema(BYTES_ROWS), "bytes", "src", -1, plan.batch_id)
    batches = list(read_range_batches(our_client, plan.ranges[0], builder, 10))
    assert [batch.num_rows for batch in batches] == [10, 10, 5]
    values = [value for batch in batches for value in batch.column("value").to_pylist()]
    assert values == [b"m%d" % i for i in range(25)]


def test_a_budget_stops_before_the_entry_that_would_overrun_it(our_client: Client, topic_name: str) -> None:
    produce(our_client, topic_name, 50, 10)  # five entries of ten
    with SubscriptionHold(our_client, [topic_name], "budget") as hold:
        plan = plan_batch(hold.states(), "budget", "t", max_messages=25)
        small = plan_batch(hold.states(), "budget", "t", max_messages=3)
    assert plan is not None and small is not None
    assert read_all(our_client, plan).num_rows == 20  # two whole entries; a third would make 30
    assert read_all(our_client, small).num_rows == 10  # at least one entry


def test_json_values_decode_with_corrupt_records_kept() -> None:
    target = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("tags", pa.list_(pa.string()))])
    values = [b'{"id": 1, "day": "2024-05-01", "tags": ["a"]}', b"not json", None, b'{"id": 2,\n "extra": true}', b""]
    fields, corrupt = decode_json(pa.array(values, pa.binary()), target, json_parse_schema(target))
    assert fields.column("id").to_pylist() == [1, None, None, 2, None]
    assert str(fields.column("day")[0]) == "2024-05-01"
    assert corrupt.to_pylist() == [None, "not json", None, None, ""]
    with pytest.raises(ValueError, match="MAP types cannot be decoded"):
        json_parse_schema(pa.schema([("m", pa.map_(pa.string(), pa.string()))]))
    assert json.loads(b'{"id": 2,\n "extra": true}')["id"] == 2  # a newline is whitespace in JSON


def test_a_range_whose_messages_never_come_fails_with_its_position(our_client: Client, topic_name: str) -> None:
    produce(our_client, topic_name, 3, 1)
    with SubscriptionHold(our_client, [topic_name], "gone") as hold:
        plan = plan_batch(hold.states(), "gone", "t")
    assert plan is not None
    # The range claims entries up to 9; the partition has entries 0..2.
    beyond = replace(plan.ranges[0], last=Position(plan.ranges[0].last.ledger_id, 9))
    builder = RowBatchBuilder(arrow_schema(BYTES_ROWS), "bytes", "src", -1, "b")
    with pytest.raises(RangeReadError, match=r"no message within 0.5 s reading .* \(3 read\)"):
        list(read_range_batches(our_client, beyond, builder, 0.5))
