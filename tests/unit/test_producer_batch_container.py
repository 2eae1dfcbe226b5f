"""The batch container's flush triggers and accounting."""

from __future__ import annotations

from airflow_pulsar.client.producer.batch_container import BatchContainer
from airflow_pulsar.client.protocol.batch import encode_single, iter_batch


def _noop(result: object, message_id: object) -> None:
    pass


def test_full_at_max_messages() -> None:
    container = BatchContainer(max_messages=3, max_bytes=10_000)
    assert not container.add(encode_single(b"a"), _noop, 0, 1)
    assert not container.add(encode_single(b"b"), _noop, 1, 1)
    assert container.add(encode_single(b"c"), _noop, 2, 1)


def test_full_at_max_bytes_and_space_check() -> None:
    container = BatchContainer(max_messages=1000, max_bytes=100)
    single = encode_single(b"x" * 40)
    assert container.has_space(len(single))  # an empty batch takes anything
    assert not container.add(single, _noop, 0, 40)
    assert container.has_space(len(single))
    assert not container.add(single, _noop, 1, 40)
    assert not container.has_space(len(single)), "a third would pass max_bytes: flush first"
    assert container.add(encode_single(b"y" * 20), _noop, 2, 20)


def test_oversized_message_is_not_batched() -> None:
    container = BatchContainer(max_messages=10, max_bytes=100)
    assert container.accepts(100)
    assert not container.accepts(101)


def test_drain_gives_a_decodable_payload_and_resets() -> None:
    container = BatchContainer(max_messages=10, max_bytes=10_000)
    for i in range(4):
        container.add(encode_single(f"m{i}".encode(), sequence_id=10 + i), _noop, 10 + i, 2)
    batch = container.drain()
    assert (batch.num_messages, batch.first_sequence_id, batch.last_sequence_id, batch.payload_bytes) == (4, 10, 13, 8)
    decoded = [(meta.sequence_id, payload) for _, meta, payload in iter_batch(batch.payload, 4)]
    assert decoded == [(10 + i, f"m{i}".encode()) for i in range(4)]
    assert len(container) == 0 and container.has_space(10**6)
