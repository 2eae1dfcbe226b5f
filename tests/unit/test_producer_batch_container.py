"""The batch container's flush triggers and accounting."""

from __future__ import annotations

from airflow_pulsar.client.producer.batch_container import BatchContainer
from airflow_pulsar.client.protocol.batch import parse_single, read_batch, single_header


def _noop(result: object, message_id: object) -> None:
    pass


def _add(container: BatchContainer, payload: bytes, sequence_id: int) -> bool:
    return container.add(single_header(len(payload), sequence_id), payload, _noop, sequence_id)


def test_full_at_max_messages() -> None:
    container = BatchContainer(max_messages=3, max_bytes=10_000)
    assert not _add(container, b"a", 0)
    assert not _add(container, b"b", 1)
    assert _add(container, b"c", 2)


def test_full_at_max_bytes_and_space_check() -> None:
    container = BatchContainer(max_messages=1000, max_bytes=100)
    encoded = len(single_header(40, 0)) + 40
    assert container.has_space(encoded)  # an empty batch takes anything
    assert not _add(container, b"x" * 40, 0)
    assert container.has_space(encoded)
    assert not _add(container, b"x" * 40, 1)
    assert not container.has_space(encoded), "a third would pass max_bytes: flush first"
    assert _add(container, b"y" * 20, 2)


def test_oversized_message_is_not_batched() -> None:
    container = BatchContainer(max_messages=10, max_bytes=100)
    assert container.accepts(100)
    assert not container.accepts(101)


def test_drain_gives_a_decodable_payload_and_resets() -> None:
    container = BatchContainer(max_messages=10, max_bytes=10_000)
    for i in range(4):
        _add(container, f"m{i}".encode(), 10 + i)
    container.add(single_header(2), b"m4", None, 14)  # no callback: nobody waits for this one
    batch = container.drain()
    assert (batch.num_messages, batch.first_sequence_id, batch.last_sequence_id, batch.payload_bytes) == (5, 10, 14, 10)
    assert batch.callbacks[-1] is None
    decoded = read_batch(batch.payload, 5, lambda _, index, payload, single: (parse_single(single), payload))
    assert [(meta.sequence_id if meta.HasField("sequence_id") else None, payload) for meta, payload in decoded] == [
        *((10 + i, f"m{i}".encode()) for i in range(4)),
        (None, b"m4"),
    ]
    assert len(container) == 0 and container.has_space(10**6)
