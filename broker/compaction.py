"""Topic compaction, as Pulsar defines it: the latest message of each key up to a horizon.

Compaction reads a topic's entries up to its last one at the time (the *horizon*) and keeps, for
each message key, only the newest message; a message with an empty payload (a tombstone, which
is what a null value is on the wire) removes its key, and messages without a key are dropped (as
with Pulsar's default ``topicCompactionRetainNullKey=false``). Nothing is rewritten: the result is
a view over the topic's own entries, an entry kept whole or as a mask of the batch indexes kept,
so every message keeps its id. Consumers and readers with ``read_compacted`` on Exclusive or
Failover subscriptions are sent only what the view keeps up to the horizon, and every entry after
it as usual. A batch compaction thinned goes out as Pulsar sends it from its compacted ledger:
each message not kept is replaced by an empty one marked ``compacted_out``.

The view lives in memory: after a restart a topic reads uncompacted until compacted again.
With transactions, compaction stops before the first entry of a transaction still open and passes
over transaction markers and the entries of aborted transactions, as Pulsar's compactor does.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_pulsar.client.protocol import checksum
from airflow_pulsar.client.protocol.batch import BatchFormatError, parse_single, read_batch
from airflow_pulsar.client.protocol.compression import CompressionError, compress, decompress
from airflow_pulsar.client.protocol.frames import FrameError, encode_entry, split_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import SingleMessageMetadata

from .ledger import Ledger
from .storage import StoredEntry
from .transactions.buffer import TransactionBuffer

log = logging.getLogger(__name__)

# How many entries compaction reads at a time, letting the broker serve clients in between.
_READ_BLOCK = 500
# A whole entry kept (a message that is no batch, or a batch compaction cannot look into).
WHOLE = -1


class CompactionState(enum.Enum):
    """Pulsar's ``LongRunningProcessStatus.Status``."""

    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


# A message compaction took out of a batch, as Pulsar writes it: no payload, no key.
_COMPACTED_OUT = SingleMessageMetadata(compacted_out=True, payload_size=0).SerializeToString()


@dataclass(frozen=True)
class CompactedView:
    """What compaction kept up to ``horizon``: entry id -> a mask of the batch indexes kept, or WHOLE;
    and the thinned batches made so far."""

    horizon: int
    kept: dict[int, int]
    # The topic's bytes up to the horizon: what grew after it counts toward the threshold.
    size: int = 0
    thinned: dict[int, StoredEntry] = field(default_factory=dict)

    def entry(self, entry: StoredEntry) -> StoredEntry | None:
        """What a compacted reader is sent of an entry at or below the horizon: None when compaction
        kept nothing of it, the entry itself when it kept it whole, else the batch thinned."""
        mask = self.kept.get(entry.entry_id)
        if mask is None or mask == WHOLE:
            return None if mask is None else entry
        thinned = self.thinned.get(entry.entry_id)
        if thinned is None:
            thinned = self.thinned[entry.entry_id] = _thin(entry, mask)
        return thinned


@dataclass
class Compaction:
    """A topic's compaction: the view of the last successful run and the state of the latest."""

    ledger: Ledger
    transactions: TransactionBuffer
    view: CompactedView | None = None
    state: CompactionState = CompactionState.NOT_RUN
    last_error: str = ""
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def running(self) -> bool:
        """Whether a run is under way."""
        return self.state == CompactionState.RUNNING

    def trigger(self) -> None:
        """Start a run in the background (the caller checked that none is running)."""
        self.state = CompactionState.RUNNING
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            self.view = await compact(self.ledger, self.transactions)
        except Exception as exc:  # reported through the status, as Pulsar reports a failed run
            log.warning("compaction of ledger %s failed: %s", self.ledger.ledger_id, exc)
            self.state, self.last_error = CompactionState.ERROR, str(exc)
        else:
            self.state, self.last_error = CompactionState.SUCCESS, ""

    def uncompacted_bytes(self) -> int:
        """The topic's bytes published since the horizon of its last compaction (all, before any)."""
        return self.ledger.total_bytes - (self.view.size if self.view is not None else 0)

    def status(self) -> dict[str, Any]:
        """Pulsar's LongRunningProcessStatus document."""
        return {"status": self.state.value, "lastError": self.last_error}

    def filter(self, entry: StoredEntry) -> StoredEntry | None:
        """What a compacted reader is sent of ``entry``: None to skip it (see CompactedView.entry);
        an entry past the horizon (or on a topic never compacted) as it is."""
        view = self.view
        if view is None or entry.entry_id > view.horizon:
            return entry
        return view.entry(entry)


class CompactionMonitor:
    """Pulsar's compaction monitor: every ``interval`` seconds, each topic that grew past its
    threshold (its namespace's ``compactionThreshold``, in bytes; None or 0: never) since its last
    compaction is compacted."""

    def __init__(self, interval: float, topics: Callable[[], Iterable[tuple[Compaction, int | None]]]):
        self._interval = interval
        self._topics = topics
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Check every interval from now on."""
        self._timer = loop.call_later(self._interval, self._check, loop)

    def stop(self) -> None:
        """Check no more."""
        if self._timer is not None:
            self._timer.cancel()

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        for compaction, threshold in self._topics():
            if threshold and not compaction.running and compaction.uncompacted_bytes() > threshold:
                compaction.trigger()
        self.start(loop)


async def compact(ledger: Ledger, transactions: TransactionBuffer) -> CompactedView:
    """The compacted view of ``ledger`` up to its current last entry (before any open transaction)."""
    horizon = transactions.max_read_entry()
    size = ledger.bytes_in(0, horizon)
    latest: dict[bytes | str, tuple[int, int]] = {}  # key -> (entry id, batch index or WHOLE)
    position = 0
    while position <= horizon:
        for entry in ledger.read(position, min(_READ_BLOCK, horizon - position + 1)):
            position = entry.entry_id + 1
            if transactions.hides(entry.entry_id):
                continue
            for key, index, tombstone in _keyed_messages(entry):
                if tombstone:
                    latest.pop(key, None)
                else:
                    latest[key] = (entry.entry_id, index)
        await asyncio.sleep(0)
    kept: dict[int, int] = {}
    for entry_id, index in latest.values():
        kept[entry_id] = WHOLE if index == WHOLE else kept.get(entry_id, 0) | 1 << index
    return CompactedView(horizon, kept, size)


def _keyed_messages(entry: StoredEntry) -> list[tuple[bytes | str, int, bool]]:
    """(key, batch index or WHOLE, whether a tombstone) of each keyed message in an entry."""
    try:
        metadata, payload = split_entry(entry.data)
    except FrameError:
        return []
    if not metadata.HasField("num_messages_in_batch"):
        if not metadata.HasField("partition_key"):
            return []
        return [(metadata.partition_key, WHOLE, metadata.null_value or not len(payload))]
    if metadata.encryption_keys:
        return []  # an encrypted batch cannot be looked into: its messages have no key here
    try:
        data = decompress(metadata.compression, payload, metadata.uncompressed_size)

        def build(_: Any, index: int, body: bytes, single: Any) -> tuple[bytes | str, int, bool] | None:
            single = parse_single(single)
            if not single.HasField("partition_key"):
                return None
            return single.partition_key, index, single.null_value or not body

        messages = read_batch(data, metadata.num_messages_in_batch, build)
    except (BatchFormatError, CompressionError):
        return []
    return [message for message in messages if message is not None]


def _thin(entry: StoredEntry, mask: int) -> StoredEntry:
    """The batch ``entry`` with the messages whose bit is clear in ``mask`` compacted out."""
    metadata, payload = split_entry(entry.data)
    data = decompress(metadata.compression, payload, metadata.uncompressed_size)

    def build(_: Any, index: int, body: bytes, single: bytes | SingleMessageMetadata) -> bytes:
        if not mask >> index & 1:
            return len(_COMPACTED_OUT).to_bytes(4, "big") + _COMPACTED_OUT
        raw = single if isinstance(single, bytes) else single.SerializeToString()
        return len(raw).to_bytes(4, "big") + raw + body

    batch = b"".join(read_batch(data, metadata.num_messages_in_batch, build))
    if metadata.HasField("uncompressed_size"):
        metadata.uncompressed_size = len(batch)
    region = encode_entry(metadata, compress(metadata.compression, batch))
    return StoredEntry(entry.entry_id, entry.publish_time, entry.num_messages, checksum.crc32c(region), entry.sticky_key, region)
