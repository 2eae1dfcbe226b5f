"""A topic partition's entry log: appends, reads through a tail cache, and message counting.

Entry ids are dense from 0, a failed commit notwithstanding: once an entry fails, the ledger is
*fenced* (as Pulsar fences a topic whose BookKeeper write failed): it takes no new entry, the
storage refuses its entries still queued, and when every entry in flight has settled the next entry
id goes back to just after the last committed one. Alongside the entries the ledger keeps prefix
sums of message counts
and sizes, so the backlog between any two positions is two lookups. The message prefix sums are
also each entry's *broker entry index* (PIP-90), rebuilt from the stored counts at every start.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
from array import array
from collections.abc import Callable

from airflow_pulsar.client.protocol.PulsarApi_pb2 import BrokerEntryMetadata
from airflow_pulsar.client.protocol.wire import tag

from .commit import Commit
from .storage import Storage, StoredEntry

# Tail entries kept in memory so consumers that keep up never touch the database.
DEFAULT_CACHE_BYTES = 16 * 1024 * 1024
# What the cache holds for an entry besides its data (the tuple, its numbers, the dict slot),
# counted with it: a flood of tiny entries must not hold many times the cache's bytes.
CACHED_ENTRY_OVERHEAD = 256
# Pulsar keeps more of an entry than the producer's [metadata size][metadata][payload]: the
# checksum header (magic and CRC32C) it arrived with and, with the index interceptor, the broker
# entry metadata ([magic][u32 size][BrokerEntryMetadata{index}]). Its byte counts (storageSize,
# backlogSize, internal stats sizes) include both, so the ledger's do too.
CHECKSUM_HEADER_BYTES = 6
_ENTRY_METADATA_HEADER_BYTES = 6
_INDEX_TAG_BYTES = len(tag(BrokerEntryMetadata, "index"))


def stored_size(data_size: int, index: int | None) -> int:
    """The bytes Pulsar stores for an entry of ``data_size``; ``index``: its broker entry index,
    None without the index interceptor."""
    size = data_size + CHECKSUM_HEADER_BYTES
    if index is not None:  # the broker's BrokerEntryMetadata holds only the index: its key, then its varint
        size += _ENTRY_METADATA_HEADER_BYTES + _INDEX_TAG_BYTES + max(1, (index.bit_length() + 6) // 7)
    return size


class Ledger:
    """The entries of one topic partition."""

    def __init__(
        self,
        storage: Storage,
        ledger_id: int,
        index: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        entry_index: bool = True,
    ):
        self.storage = storage
        self.ledger_id = ledger_id
        # Sizes count the broker entry metadata when the broker stores it (the index interceptor is on).
        self._stores_index = entry_index
        self._cum_messages = array("q", [0])
        self._cum_bytes = array("q", [0])
        for entry_id, num_messages, size in index:
            # A database written before fencing may have a hole left by a failed commit: an empty entry.
            while len(self._cum_messages) <= entry_id:
                self._push_index(0, 0)
            self._push_index(num_messages, size)
        self.next_entry_id = len(self._cum_messages) - 1
        # The cache holds each entry's fields as a plain tuple: tuples of numbers and bytes drop out
        # of the garbage collector's sight, while a heap of entry objects made every full collection
        # walk all of them (unbatched publishing fell from 23k to 16k msg/s as the caches filled).
        self._cache: dict[int, tuple[int, int, int, int, bytes | None, bytes]] = {}
        self._cache_size = 0
        self.cache_bytes = cache_bytes
        # Called once per committed group of entries (from the event loop), not once per entry.
        self.on_committed: list[Callable[[], None]] = []
        self._notify_scheduled = False
        # Entries appended and not yet settled; while fenced, appends are refused.
        self._in_flight = 0
        self.fenced = False
        # Called when the ledger takes entries again after a failed commit.
        self.on_unfenced: list[Callable[[], None]] = []

    def _push_index(self, num_messages: int, size: int) -> None:
        """Count one more entry: ``size`` is its data's length (0 with no messages: a hole)."""
        total = self._cum_messages[-1] + num_messages
        self._cum_messages.append(total)
        if num_messages:
            size = stored_size(size, total - 1 if self._stores_index else None)
        self._cum_bytes.append(self._cum_bytes[-1] + size)

    @property
    def last_entry_id(self) -> int:
        """The newest committed entry, -1 when there is none."""
        return len(self._cum_messages) - 2

    @property
    def total_bytes(self) -> int:
        """Bytes in every committed entry."""
        return self._cum_bytes[-1]

    def messages_in(self, first: int, last: int) -> int:
        """Messages in the entries ``first..last`` (inclusive, clamped to what is committed)."""
        last = min(last, self.last_entry_id)
        first = max(first, 0)
        return self._cum_messages[last + 1] - self._cum_messages[first] if last >= first else 0

    def bytes_in(self, first: int, last: int) -> int:
        """Bytes in the entries ``first..last`` (inclusive, clamped)."""
        last = min(last, self.last_entry_id)
        first = max(first, 0)
        return self._cum_bytes[last + 1] - self._cum_bytes[first] if last >= first else 0

    def entry_index(self, entry_id: int) -> int:
        """The broker entry index of a committed entry, as Pulsar's AppendIndexMetadataInterceptor
        assigns it: the 0-based position, among every message of the topic, of the entry's last message."""
        return self._cum_messages[entry_id + 1] - 1

    def entries_for(self, first: int, messages: int, limit: int) -> int:
        """How many entries from ``first`` (a committed one) hold ``messages`` messages: 1 .. ``limit``."""
        cumulative = self._cum_messages
        end = bisect.bisect_left(cumulative, cumulative[first] + messages, first + 1)
        return max(1, min(limit, end - first))

    def entry_messages(self, entry_id: int) -> int:
        """The message count of one committed entry."""
        return self._cum_messages[entry_id + 1] - self._cum_messages[entry_id]

    def append(self, entry: StoredEntry, producer_name: str | None, sequence_id: int | None) -> Commit:
        """Assign the next entry id to ``entry`` and queue it; the Commit finishes when committed.
        The caller checks :attr:`fenced` first: a fenced ledger takes no entry."""
        assert not self.fenced, "append to a fenced ledger"
        self._in_flight += 1
        entry.entry_id = self.next_entry_id
        self.next_entry_id += 1
        commit = self.storage.append(self.ledger_id, entry, producer_name, sequence_id)
        commit.add_done_callback(functools.partial(self._committed, entry))
        return commit

    def _committed(self, entry: StoredEntry, commit: Commit) -> None:
        self._in_flight -= 1
        if commit.exception() is not None:
            self.fenced = True
            if not self._in_flight:
                self._unfence()
            return
        self._push_index(entry.num_messages, len(entry.data))
        self._cache[entry.entry_id] = (
            entry.entry_id, entry.publish_time, entry.num_messages, entry.checksum, entry.sticky_key, entry.data
        )
        self._cache_size += len(entry.data) + CACHED_ENTRY_OVERHEAD
        while self._cache_size > self.cache_bytes and self._cache:
            oldest = next(iter(self._cache))
            self._cache_size -= len(self._cache.pop(oldest)[5]) + CACHED_ENTRY_OVERHEAD
        if not self._notify_scheduled:
            # After the rest of the group: one dispatch then serves every entry in it.
            self._notify_scheduled = True
            asyncio.get_running_loop().call_soon(self._notify)

    def _unfence(self) -> None:
        # Every later entry failed too (the storage refused them): reuse their ids, leaving no hole.
        self.next_entry_id = self.last_entry_id + 1
        self.storage.unfence(self.ledger_id)
        self.fenced = False
        for listener in self.on_unfenced:
            listener()

    def _notify(self) -> None:
        self._notify_scheduled = False
        for listener in self.on_committed:
            listener()

    def read(self, first: int, limit: int) -> list[StoredEntry]:
        """Up to ``limit`` committed entries from ``first`` on, in order."""
        last = min(self.last_entry_id, first + limit - 1)
        if last < first:
            return []
        cache = self._cache
        if first in cache and last in cache:  # the cache holds a run of consecutive entries
            return [StoredEntry(*cache[e]) for e in range(first, last + 1)]
        return self.storage.read_entries(self.ledger_id, first, last, limit)

    def entry_at_or_after(self, publish_time: int) -> int:
        """The first entry published at or after ``publish_time``; past the end if none."""
        found = self.storage.first_entry_at_or_after(self.ledger_id, publish_time)
        return self.last_entry_id + 1 if found is None else found
