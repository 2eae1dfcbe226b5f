"""Splitting one message that exceeds the broker's max message size into chunks.

Each chunk is its own SEND with the same sequence id and a copy of the message's metadata plus
``uuid`` (producer name + "-" + sequence id), ``chunk_id``, ``num_chunks_from_msg`` and
``total_chunk_msg_size``; consumers reassemble them by uuid. The payload is compressed before it is
split, so ``total_chunk_msg_size`` is the compressed size.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..protocol.PulsarApi_pb2 import MessageMetadata

__all__ = ["chunk_size_for", "split_into_chunks"]

# Room for the chunk fields added to the metadata and the SEND command around it.
_CHUNK_FIELDS_ALLOWANCE = 64


def chunk_size_for(max_message_size: int, metadata: MessageMetadata) -> int:
    """The largest chunk payload that keeps each chunk's metadata + payload under the limit."""
    size = max_message_size - metadata.ByteSize() - len(metadata.producer_name) - _CHUNK_FIELDS_ALLOWANCE
    if size <= 0:
        raise ValueError(f"metadata of {metadata.ByteSize()} bytes leaves no room under {max_message_size} bytes")
    return size


def split_into_chunks(
    payload: bytes, metadata: MessageMetadata, chunk_size: int
) -> Iterator[tuple[MessageMetadata, memoryview]]:
    """Yield ``(metadata, payload slice)`` per chunk; ``metadata`` already has sequence id and name."""
    total = len(payload)
    count = max(1, -(-total // chunk_size))
    uuid = f"{metadata.producer_name}-{metadata.sequence_id}"
    view = memoryview(payload)
    for chunk_id in range(count):
        chunk = MessageMetadata()
        chunk.CopyFrom(metadata)
        chunk.uuid = uuid
        chunk.chunk_id = chunk_id
        chunk.num_chunks_from_msg = count
        chunk.total_chunk_msg_size = total
        yield chunk, view[chunk_id * chunk_size : (chunk_id + 1) * chunk_size]
