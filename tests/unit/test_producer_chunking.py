"""Splitting a message into chunks."""

from __future__ import annotations

from airflow_pulsar.client.producer.chunking import chunk_size_for, split_into_chunks
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata


def test_chunks_cover_the_payload_with_chunk_fields() -> None:
    metadata = MessageMetadata(producer_name="p", sequence_id=7, publish_time=1)
    payload = bytes(range(256)) * 100
    chunks = list(split_into_chunks(payload, metadata, 10_000))
    assert len(chunks) == 3
    assert b"".join(part.tobytes() for _, part in chunks) == payload
    for index, (meta, _) in enumerate(chunks):
        assert (meta.uuid, meta.chunk_id, meta.num_chunks_from_msg) == ("p-7", index, 3)
        assert meta.total_chunk_msg_size == len(payload) and meta.sequence_id == 7


def test_chunk_size_leaves_room_for_metadata() -> None:
    metadata = MessageMetadata(producer_name="producer", sequence_id=1, publish_time=1)
    size = chunk_size_for(5000, metadata)
    chunk, _ = next(split_into_chunks(b"x" * 20000, metadata, size))
    assert size + chunk.ByteSize() + 4 <= 5000
