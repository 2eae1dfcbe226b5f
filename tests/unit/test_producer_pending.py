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
