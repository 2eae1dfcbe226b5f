"""The public entry-level API: reading ranges of whole entries, for bulk readers (the Spark ingest)
that turn many messages into columns rather than receive Message objects one by one.

Not on the official ``pulsar`` API. A reader (:func:`create_reader`, the official
``pulsar.Client.create_reader`` with a ``batch_receive_policy``) whose consumer's
``take_entries()`` gives :class:`ReceivedEntry` objects: decrypted, reassembled and decompressed,
not split into messages. :func:`read_columns` gives their messages as columns (:class:`RunColumns`
of :class:`MessageLists` or :class:`MessageSpans`) ready for Arrow, without a Message object per
message; :func:`text` reads their texts as ``Message`` does. Acknowledge an entry cumulatively
with its ``last_message_id()``.

numpy and pyarrow are optional here as everywhere in the client: with numpy, batches of the layout
producers write are read many messages at a time; without it, every entry is read the exact way.

Example::

    reader = create_reader(client, topic, start, batch_receive_policy=ConsumerBatchReceivePolicy(10_000, -1, 100))
    entries = reader.consumer.take_entries()
    for run in read_columns(entries):
        ...  # run.counts: messages per entry; run.messages: their columns
"""

from __future__ import annotations

from .consumer import ReceivedEntry, create_reader
from .consumer.message import text
from .protocol.columnar import read_columns
from .protocol.message_columns import Entry, MessageLists, MessageSpans, RunColumns

__all__ = [
    "Entry",
    "MessageLists",
    "MessageSpans",
    "ReceivedEntry",
    "RunColumns",
    "create_reader",
    "read_columns",
    "text",
]
