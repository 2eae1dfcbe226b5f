"""Send ops and the pending queue: receipt matching by sequence range, expiry, drain."""

from __future__ import annotations

from airflow_pulsar.client.producer.entry_builder import Entry
from airflow_pulsar.client.producer.pending import OpSend, PendingQueue


def _op(first: int, last: int, deadline: float | None = None) -> OpSend:
    return OpSend(
        sequence_id=first,
        highest_sequence_id=last,
        num_messages=last - first + 1,
        batched=first != last,
        entry=Entry(b"", 0),
        callbacks=[],
        permits=last - first + 1,
        memory=0,
        created=0.0,
        deadline=deadline,
    )


def test_receipt_matches_anywhere_in_batch_range() -> None:
    op = _op(10, 14)
    assert [op.matches(s) for s in (9, 10, 12, 14, 15)] == [False, True, True, True, False]


def test_queue_is_fifo() -> None:
    queue = PendingQueue()
    a, b = _op(0, 4), _op(5, 5)
    queue.append(a)
    queue.append(b)
    assert queue.head() is a and queue.tail() is b and queue.messages() == 6
    assert queue.pop_head() is a and not a.done, "done only once its callbacks ran"
    assert queue.head() is b


def test_pop_expired_takes_only_the_expired_prefix() -> None:
    queue = PendingQueue()
    ops = [_op(0, 0, 1.0), _op(1, 1, 2.0), _op(2, 2, 3.0)]
    for op in ops:
        queue.append(op)
    assert queue.pop_expired(2.0) == ops[:2]
    assert list(queue) == ops[2:]
    assert queue.pop_all() == ops[2:] and len(queue) == 0


class _Receipt:
    def __init__(self, sequence_id: int) -> None:
        self.sequence_id = sequence_id


def test_pop_receipted_matches_receipts_in_order_skipping_those_of_expired_ops() -> None:
    queue = PendingQueue()
    ops = [_op(5, 9), _op(10, 10), _op(11, 11)]
    for op in ops:
        queue.append(op)
    receipts = [_Receipt(3), _Receipt(9), _Receipt(10)]  # 3: an op that timed out before its receipt
    completed, unexpected = queue.pop_receipted(receipts)
    assert [(op, r) for op, r in completed] == [(ops[0], receipts[1]), (ops[1], receipts[2])] and unexpected is None
    assert list(queue) == ops[2:]


def test_pop_receipted_stops_at_a_receipt_ahead_of_the_head() -> None:
    queue = PendingQueue()
    ops = [_op(0, 0), _op(1, 1)]
    for op in ops:
        queue.append(op)
    ahead, later = _Receipt(7), _Receipt(1)
    completed, unexpected = queue.pop_receipted([_Receipt(0), ahead, later])
    assert [op for op, _ in completed] == ops[:1] and unexpected is ahead
    assert list(queue) == ops[1:], "receipts after the unexpected one are not matched"
