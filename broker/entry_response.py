"""One stored entry as Pulsar's admin REST returns it: ``X-Pulsar-*`` headers and the payload.

Peek-messages, get-message-by-id and examine-message all answer this way. The headers are the
ones Apache Pulsar 4.2.4 sends (the message id, properties as one JSON object, the broker entry
index when enabled, publish, event and delivery times, batch size, producer and sequence ids, a
marker's type, the transaction an entry was sent in and whether it aborted, whether the entry lies
past the max read position (``txn-uncommitted``), one header per cluster the entry is replicated
to); the body is the entry's payload decompressed: a
whole batch, with its per-message headers, when the entry is a batch.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from aiohttp import web

from airflow_pulsar.client.protocol.compression import decompress
from airflow_pulsar.client.protocol.frames import split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata

from .ledger import stored_size
from .storage import StoredEntry
from .transactions.buffer import TransactionBuffer


def _time(millis: int) -> str:
    """Pulsar's DateFormatter form: ISO 8601 in UTC, the fraction without trailing zeros, e.g.
    2026-01-02T03:04:05.678Z, 2026-01-02T03:04:05.6Z, 2026-01-02T03:04:05Z."""
    seconds, fraction = divmod(millis, 1000)
    text = datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "")
    return f"{text}.{fraction:03d}".rstrip("0") + "Z" if fraction else text + "Z"


def _batch_size(entry: StoredEntry, payload: memoryview, index: int | None) -> int:
    """Pulsar's ``X-Pulsar-batch-size``: the entry as the bookie holds it, less its MessageMetadata."""
    metadata_bytes = len(entry.data) - 4 - len(payload)  # the data is [u32 size][metadata][payload]
    return stored_size(len(entry.data), index) - metadata_bytes


def _transaction_headers(entry: StoredEntry, metadata: MessageMetadata, transactions: TransactionBuffer) -> dict[str, str]:
    """Pulsar's transaction headers: the marker type, the transaction's id and whether it aborted
    (for an entry sent in one, or its marker), and whether the entry lies past the max read position."""
    headers = {}
    if metadata.HasField("marker_type"):
        headers["X-Pulsar-marker-type"] = str(metadata.marker_type)
    sent_in = transactions.transaction_of(entry.entry_id)
    if sent_in is not None:
        txn, aborted = sent_in
        headers["X-Pulsar-txnid-least-bits"] = str(txn.least_bits)
        headers["X-Pulsar-txnid-most-bits"] = str(txn.most_bits)
        headers["X-Pulsar-txn-aborted"] = "true" if aborted else "false"
    headers["X-Pulsar-txn-uncommitted"] = "true" if entry.entry_id > transactions.max_read_entry() else "false"
    return headers


def _headers(
    ledger_id: int,
    entry: StoredEntry,
    metadata: MessageMetadata,
    payload: memoryview,
    index: int | None,
    transactions: TransactionBuffer,
) -> list[tuple[str, str]]:
    """The ``X-Pulsar-*`` headers of an entry whose metadata and (stored) payload are given."""
    properties = {kv.key: kv.value for kv in metadata.properties}
    headers = {
        "X-Pulsar-Message-ID": f"{ledger_id}:{entry.entry_id}",
        "X-Pulsar-PROPERTY": json.dumps(properties, separators=(",", ":")),
    }
    if index is not None:
        headers["X-Pulsar-Broker-Entry-METADATA-index"] = str(index)
    headers["X-Pulsar-publish-time"] = _time(metadata.publish_time)
    if metadata.event_time:
        headers["X-Pulsar-event-time"] = _time(metadata.event_time)
    if metadata.HasField("deliver_at_time"):
        headers["X-Pulsar-deliver-at-time"] = _time(metadata.deliver_at_time)
    if metadata.HasField("num_messages_in_batch"):
        headers["X-Pulsar-num-batch-message"] = str(metadata.num_messages_in_batch)
        headers["X-Pulsar-batch-size"] = str(_batch_size(entry, payload, index))
    if metadata.HasField("partition_key"):
        headers["X-Pulsar-partition-key"] = metadata.partition_key
    headers["X-Pulsar-Is-Encrypted"] = "true" if len(metadata.encryption_keys) else "false"
    headers["X-Pulsar-producer-name"] = metadata.producer_name
    headers["X-Pulsar-sequence-id"] = str(metadata.sequence_id)
    if metadata.HasField("highest_sequence_id"):
        headers["X-Pulsar-highest-sequence-id"] = str(metadata.highest_sequence_id)
    headers.update(_transaction_headers(entry, metadata, transactions))
    # One header per cluster, as Pulsar writes a repeated field.
    return [*headers.items(), *(("X-Pulsar-replicated-to", cluster) for cluster in metadata.replicate_to)]


def entry_response(ledger_id: int, entry: StoredEntry, index: int | None, transactions: TransactionBuffer) -> web.Response:
    """The HTTP answer for one entry: its headers, and its payload decompressed as the body.

    ``index`` is the entry's broker entry index, or None where the broker appends none;
    ``transactions`` the topic's transaction buffer.
    """
    metadata, payload = split_entry(entry.data)
    headers = _headers(ledger_id, entry, metadata, payload, index, transactions)
    body = bytes(decompress(metadata.compression, payload, metadata.uncompressed_size))
    return web.Response(body=body, headers=headers, content_type="application/octet-stream")
