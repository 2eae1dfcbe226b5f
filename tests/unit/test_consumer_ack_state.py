"""Batch-index ack state in the ack-grouping tracker: per-entry bitsets, partial and cumulative acks, restore."""

from __future__ import annotations

from airflow_pulsar.client.consumer.ack_grouping import AckGroupingTracker, PendingAcks
from airflow_pulsar.client.protocol import commands
from airflow_pulsar.client.protocol.frames import encode_command
from airflow_pulsar.client.protocol.message_id import MessageId
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand, CommandAck
from airflow_pulsar.client.timer import Timer

TIMER = Timer("test-timer")  # grouped acks wait an hour: they stay pending for the test to look at


def tracker(batch_index_ack: bool = False) -> AckGroupingTracker:
    return AckGroupingTracker(lambda pending: True, TIMER, group_time=3600, batch_index_ack=batch_index_ack)


def test_a_batch_entry_is_acknowledged_whole_once_its_last_index_is() -> None:
    acks = tracker()
    state = acks.track_batch(1, 5, 0b111)
    assert acks.add_message(1, 5, 0, 3, state) is False
    assert acks.add_message(1, 5, 2, 3) is False  # by id: the same state is found by position
    assert state.bits == 0b010 and acks.pending == 0
    assert acks.add_message(1, 5, 1, 3, state) is True
    assert acks.take().entries == {(1, 5)}
    assert acks.add_message(1, 5, 0, 3) is False  # the state was dropped with the entry: a fresh one starts


def test_batch_index_acks_send_the_bitset_of_what_is_left() -> None:
    acks = tracker(batch_index_ack=True)
    state = acks.track_batch(1, 6, 0b1111)
    assert acks.add_message(1, 6, 0, 4, state) is True
    assert acks.add_message(1, 6, 2, 4, state) is True
    pending = acks.take()
    assert pending.batches == {(1, 6): (0b1010, 4)}
    [(ack_type, [data])] = pending.commands()
    assert ack_type == CommandAck.Individual and list(data.ack_set) == [0b1010] and data.batch_size == 4


def test_a_redelivery_resets_the_bitset_to_the_brokers_ack_set() -> None:
    acks = tracker()
    state = acks.track_batch(1, 7, 0b11)
    acks.add_message(1, 7, 0, 2, state)
    assert acks.track_batch(1, 7, 0b11) is state and state.bits == 0b11


def test_a_cumulative_ack_inside_a_batch() -> None:
    acks = tracker(batch_index_ack=True)
    acks.add_cumulative_message(1, 8, 1, 4)
    assert acks.take().up_to == (1, 8, 0b1100, 4)
    plain = tracker()
    plain.add_cumulative_message(1, 8, 1, 4)  # without batch-index acks: up to the entry before
    assert plain.take().up_to == (1, 7, None, 0)
    plain.add_cumulative_message(1, 8, 3, 4)  # the last index covers the entry
    assert plain.take().up_to == (1, 8, None, 0)


def test_a_cumulative_ack_drops_the_bitsets_it_covers() -> None:
    acks = tracker()
    earlier = acks.track_batch(1, 3, 0b11)
    later = acks.track_batch(1, 9, 0b11)
    acks.add_cumulative_message(1, 4, -1, 0)
    acks.add_message(1, 3, 0, 2)  # by id: the dropped state is not found, a fresh one starts
    assert earlier.bits == 0b11
    acks.add_message(1, 9, 0, 2)
    assert later.bits == 0b10


def test_acks_that_could_not_be_sent_are_restored_as_they_were() -> None:
    sent: list[PendingAcks] = []
    connected = False
    acks = AckGroupingTracker(lambda pending: connected and (sent.append(pending) or True), TIMER, group_time=0, batch_index_ack=True)
    acks.add_entry(-5, 2**63 - 1)  # positions far from zero survive as they are
    acks.add_batch_indexes(1, 2, 0b10, 2)
    acks.add_cumulative(1, 1, 0b100, 3)
    assert acks.pending == 3
    connected = True
    acks.add_entry(1, 3)
    assert sent[0].entries == {(-5, 2**63 - 1), (1, 3)}
    assert sent[0].batches == {(1, 2): (0b10, 2)}
    assert sent[0].up_to == (1, 1, 0b100, 3)
    assert sent[0].cumulative.entryId == 1 and list(sent[0].cumulative.ack_set) == [0b100]
    assert acks.acks_sent == 4 and acks.pending == 0


def test_a_restore_keeps_newer_state() -> None:
    acks = tracker()
    acks.add_batch_indexes(1, 2, 0b110, 3)
    acks.add_cumulative(1, 1)
    pending = acks.take()
    acks.add_batch_indexes(1, 2, 0b100, 3)
    acks.add_cumulative(1, 4)
    acks.restore(pending)
    again = acks.take()
    assert again.batches == {(1, 2): (0b100, 3)} and again.up_to == (1, 4, None, 0)


def test_acknowledging_a_chunked_message_acknowledges_every_chunk() -> None:
    acks = tracker()
    acks.track_chunks(1, 12, [MessageId(-1, 1, 10), MessageId(-1, 1, 11), MessageId(-1, 1, 12)])
    acks.add_entry(1, 12)
    assert acks.take().entries == {(1, 10), (1, 11), (1, 12)}
    acks.add_entry(1, 12)  # once only
    assert acks.take().entries == {(1, 12)}


def test_a_message_acknowledged_twice_stays_acknowledged() -> None:
    acks = tracker()
    state = acks.track_batch(1, 13, 0b1)
    assert acks.add_message(1, 13, 0, 1, state) is True
    assert acks.add_message(1, 13, 0, 1, state) is True
    assert acks.take().entries == {(1, 13)}


def test_pending_acks_frames_are_the_frames_of_their_commands() -> None:
    pending = PendingAcks({(3, 1), (1, 300), (1, 2), (1, 3)}, {(1, 4): (0b1010, 4), (2, 0): (0, 2)}, (1, 9, 0b1100, 4))
    # Whole entries in order, ledger by ledger, as the official clients send them.
    assert [(i.ledgerId, i.entryId) for i in pending.individual[:4]] == [(1, 2), (1, 3), (1, 300), (3, 1)]
    expected = b"".join(
        encode_command(commands.make(BaseCommand.ACK, consumer_id=7, ack_type=ack_type, message_id=ids))
        for ack_type, ids in pending.commands()
    )
    assert pending.frames(7) == expected
    whole = PendingAcks(up_to=(3, 5, None, 0))
    assert whole.frames(7) == encode_command(
        commands.make(BaseCommand.ACK, consumer_id=7, ack_type=CommandAck.Cumulative, message_id=whole.commands()[0][1])
    )
    assert PendingAcks().frames(7) == b""
