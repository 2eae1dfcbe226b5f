"""The consumer's trackers and permits, driven by a hand-cranked timer."""

from __future__ import annotations

import time

import pytest

from airflow_pulsar.client.consumer import (
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    KeySharedMode,
    subscribe,
)
from airflow_pulsar.client.consumer.ack_grouping import AckGroupingTracker, PendingAcks
from airflow_pulsar.client.consumer.chunks import ChunkedMessageCollector
from airflow_pulsar.client.consumer.negative_acks import NegativeAcksTracker
from airflow_pulsar.client.consumer.permits import Permits
from airflow_pulsar.client.consumer.settings import ConsumerSettings
from airflow_pulsar.client.consumer.unacked_tracker import UnackedMessageTracker
from airflow_pulsar.client.protocol.message_id import MessageId
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata


class FakeTimer:
    """Collects callbacks; ``fire()`` runs the due ones (all of them, regardless of delay)."""

    def __init__(self) -> None:
        self.calls: list = []

    def call_later(self, delay, callback):
        handle = _Handle(callback)
        self.calls.append(handle)
        return handle

    def call_every(self, interval, callback):
        handle = _Handle(callback, repeat=True)
        self.calls.append(handle)
        return handle

    def fire(self) -> None:
        calls, self.calls = self.calls, []
        for handle in calls:
            if not handle.cancelled:
                handle.callback()
                if handle.repeat:
                    self.calls.append(handle)


class _Handle:
    def __init__(self, callback, repeat=False):
        self.callback, self.repeat, self.cancelled = callback, repeat, False

    def cancel(self):
        self.cancelled = True


def test_ack_grouping_sends_one_command_per_group_and_keeps_the_newest_cumulative() -> None:
    sent: list[PendingAcks] = []
    timer = FakeTimer()
    tracker = AckGroupingTracker(lambda p: sent.append(p) or True, timer, group_time=0.1, max_size=3)
    tracker.add_entry(1, 5)
    tracker.add_batch_indexes(1, 6, 0b1010, 4)
    assert sent == [] and tracker.pending == 2 and len(timer.calls) == 1
    tracker.add_entry(1, 7)  # the third pending id: flush at once
    assert {d.entryId for d in sent[0].individual} == {5, 6, 7}
    tracker.add_cumulative(1, 9)
    tracker.add_cumulative(1, 8)  # older: ignored
    tracker.add_cumulative(1, 10, 0b1100, 4)  # partial cumulative, newer entry
    timer.fire()
    assert sent[1].cumulative.entryId == 10 and list(sent[1].cumulative.ack_set) == [0b1100]
    assert tracker.is_duplicate(1, 3) is False  # nothing pending any more
    assert tracker.acks_sent == 4


def test_ack_grouping_keeps_acks_while_disconnected() -> None:
    connected = False
    sent: list[PendingAcks] = []
    tracker = AckGroupingTracker(lambda p: connected and (sent.append(p) or True), FakeTimer(), group_time=0)
    tracker.add_entry(1, 1)
    tracker.add_cumulative(1, 0)
    assert tracker.pending == 2 and tracker.is_duplicate(1, 1)
    connected = True
    tracker.flush()
    assert len(sent[0].individual) == 1 and sent[0].cumulative.entryId == 0


def test_negative_acks_wait_their_delay_and_go_out_together() -> None:
    timer = FakeTimer()
    due: list = []
    tracker = NegativeAcksTracker(100, timer, due.append)
    tracker.add(1, 2)
    tracker.add(1, 1)
    timer.fire()
    assert due == [] and tracker.pending == 2  # not yet due
    time.sleep(0.11)
    timer.fire()
    assert due == [[(1, 1), (1, 2)]] and tracker.pending == 0
    assert timer.calls == []  # no timer while nothing is pending


def test_unacked_tracker_redelivers_after_a_full_turn_of_the_wheel() -> None:
    timer = FakeTimer()
    expired: list = []
    tracker = UnackedMessageTracker(1000, timer, expired.append, tick_ms=250)
    a, b = MessageId(-1, 1, 1), MessageId(-1, 1, 2)
    tracker.add(a)
    tracker.add(b)
    tracker.remove(b)
    # The first tick may come at once; four more make the whole timeout, never less.
    for _ in range(4):
        timer.fire()
    assert expired == []
    timer.fire()
    assert expired == [[a]] and tracker.pending == 0 and tracker.timeouts == 1


def test_permits_flow_at_half_the_queue_and_one_at_a_time_for_zero_queue() -> None:
    flows: list[int] = []
    permits = Permits(10, lambda n: flows.append(n) or True)
    permits.grant_initial()
    for _ in range(4):
        permits.returned()
    assert flows == [10] and permits.available == 4
    permits.returned()
    assert flows == [10, 5] and permits.available == 0
    zero: list[int] = []
    permits = Permits(0, lambda n: zero.append(n) or True)
    permits.grant_initial()
    permits.returned(3)
    permits.request_one()
    assert zero == [1]


def _chunk(uuid: str, chunk_id: int, total: int) -> MessageMetadata:
    return MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, uuid=uuid, chunk_id=chunk_id, num_chunks_from_msg=total)


def test_chunks_reassemble_in_order_and_drop_the_oldest_when_full() -> None:
    collector = ChunkedMessageCollector(max_pending=1, auto_ack_oldest=True)
    assert collector.add(_chunk("a", 0, 2), b"he", MessageId(-1, 1, 1)) is None
    assert collector.add(_chunk("b", 0, 2), b"xx", MessageId(-1, 1, 2)) is None  # "a" dropped
    assert collector.dropped == [MessageId(-1, 1, 1)]
    assert collector.add(_chunk("a", 1, 2), b"llo", MessageId(-1, 1, 3)) is None  # no first chunk
    done = collector.add(_chunk("b", 1, 2), b"yy", MessageId(-1, 1, 4))
    assert done is not None and done.payload == b"xxyy" and done.chunk_ids == [MessageId(-1, 1, 2), MessageId(-1, 1, 4)]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"receiver_queue_size": -1}, "receiver_queue_size"),
        ({"consumer_type": "shared"}, "consumer_type"),
        ({"unacked_messages_timeout_ms": 10}, "unacked_messages_timeout_ms"),
        ({"negative_ack_redelivery_delay_ms": None}, "negative_ack_redelivery_delay_ms"),
        ({"batch_index_ack_enabled": 1}, "batch_index_ack_enabled"),
        ({"message_listener": 3}, "message_listener"),
        ({"dead_letter_policy": 3}, "dead_letter_policy"),
    ],
)
def test_bad_settings_name_the_argument(settings: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ConsumerSettings("sub", **settings)


def test_bad_policies_and_subscription_names_are_refused() -> None:
    with pytest.raises(ValueError, match="subscription_name"):
        ConsumerSettings("")
    with pytest.raises(ValueError, match="max_redeliver_count"):
        ConsumerDeadLetterPolicy(0)
    with pytest.raises(ValueError, match="sticky_ranges"):
        ConsumerKeySharedPolicy(KeySharedMode.Sticky)
    with pytest.raises(ValueError, match="max_num_message"):
        ConsumerBatchReceivePolicy("10", 0, 0)
    with pytest.raises(TypeError, match="no_such_setting"):
        subscribe(None, "t", "sub", no_such_setting=1)


def test_settings_accept_the_official_enums_and_keep_official_defaults() -> None:
    import inspect

    import pulsar

    settings = ConsumerSettings("sub", consumer_type=pulsar.ConsumerType.KeyShared, initial_position=pulsar.InitialPosition.Earliest)
    assert settings.shared and settings.initial_position == 1
    official = inspect.signature(pulsar.Client.subscribe).parameters
    ours = ConsumerSettings("sub")
    for name in ("receiver_queue_size", "max_total_receiver_queue_size_across_partitions", "negative_ack_redelivery_delay_ms",
                 "unacked_messages_timeout_ms", "start_message_id_inclusive", "batch_index_ack_enabled", "max_pending_chunked_message"):
        assert getattr(ours, name) == official[name].default, name


def test_policies_accept_and_refuse_what_the_official_core_does() -> None:
    """The official core's policy builders are the oracle: an unset max redeliver count means no
    limit, and sticky ranges must be given and must not overlap (the same range twice passes)."""
    import pulsar

    import airflow_pulsar.client as ours

    def outcomes(module: object) -> list[object]:
        results: list[object] = []
        policy = module.DeadLetterPolicyBuilder().deadLetterTopic("dlq").build()  # type: ignore[attr-defined]
        results.append((policy.getMaxRedeliverCount(), policy.getDeadLetterTopic()))
        mode = module.KeySharedMode.Sticky  # type: ignore[attr-defined]
        for ranges in ([], [(0, 10), (10, 20)], [(30, 40), (0, 35)], [(0, 10), (11, 20)], [(0, 10), (0, 10)]):
            try:
                results.append(module.ConsumerKeySharedPolicy(mode, False, ranges).sticky_ranges)  # type: ignore[attr-defined]
            except ValueError:
                results.append("ValueError")
        return results

    assert outcomes(ours) == outcomes(pulsar) == [
        (2**31 - 1, "dlq"), "ValueError", "ValueError", "ValueError", [(0, 10), (11, 20)], [(0, 10), (0, 10)],
    ]
