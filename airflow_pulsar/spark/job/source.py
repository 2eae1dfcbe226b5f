"""The Python data source that reads a batch's ranges on the executors, as Arrow record batches.

``spark.read.format("pulsar_ranges").option("spec", spec_json).load()`` reads every range of the
plan. For each range a reader opens just after the range's start, reads through its last entry (or
until its message budget), and yields record batches of the row schema. A Spark task reads one
range, or with the ``tasks`` option (the most tasks the read should take; the job gives twice
Spark's default parallelism) several small ones after each other (see :mod:`.read_tasks`).
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from airflow_pulsar.client import Client, ConsumerBatchReceivePolicy
from airflow_pulsar.client.entries import ReceivedEntry, create_reader

from .columns import RowBatchBuilder, ValueDecoder, row_ddl, value_fields
from .entry_messages import entry_columns
from .faults import inject
from .plan import ReadRange
from .profiling import profiled
from .read_tasks import task_ranges
from .registry_values import registry_decoder
from .spec import IngestJobSpec

# pyspark 4.3 asks for the zone of timestamps (``timezone=``); 4.0 to 4.2 take a flag for UTC
# (``timestamp_utc=``). Executors run the cluster's pyspark, so the spelling is chosen here,
# once, from the pyspark that imports this module.
_UTC_TIMESTAMPS = (
    {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {"timestamp_utc": True}
)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of Spark rows, timestamps in UTC, on every supported pyspark."""
    return to_arrow_schema(schema, **_UTC_TIMESTAMPS)

log = logging.getLogger(__name__)

ROWS_PER_BATCH = 10_000
# Permits a reader offers: enough entries in flight that the broker never waits for a FLOW.
READER_QUEUE_SIZE = 20_000
# One take of a reader: entries up to a batch of messages (and 16 MiB), so a worker holds at most
# a take's entries beside the rows being built, however large the backlog.
TAKE = ConsumerBatchReceivePolicy(ROWS_PER_BATCH, 16 * 1024 * 1024, 100)

# One client per Python worker process and broker; workers are reused across tasks.
_clients: dict[str, Client] = {}


class RangeReadError(RuntimeError):
    """A range could not be read to its end."""


class PulsarRangesDataSource(DataSource):
    """Reads the ranges of the plan in the ``spec`` option (an IngestJobSpec as JSON), with at
    most the ``tasks`` option's Spark tasks (default: one per range), never fewer than the spec's
    ``min_tasks``."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_ranges"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        if "spec" not in options:
            raise ValueError("the pulsar_ranges data source needs the 'spec' option (an IngestJobSpec as JSON)")
        self.spec = IngestJobSpec.from_json(options["spec"])
        tasks = options.get("tasks")
        if tasks is not None and not (tasks.isdigit() and int(tasks) >= 1):
            raise ValueError(f"the pulsar_ranges data source's 'tasks' option is a positive integer, got {tasks!r}")
        ranges = len(self.spec.plan.ranges)
        self.tasks = ranges if tasks is None else max(int(tasks), self.spec.min_tasks)

    def schema(self) -> str:
        spec = self.spec
        if spec.topic_schema is not None:
            return row_ddl(spec.value_format, spec.topic_schema.value_ddl())
        return row_ddl(spec.value_format, spec.value_schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        return PulsarRangesReader(self.spec, schema, self.tasks)


class RangePartition(InputPartition):
    """The ranges of the plan one Spark task reads, one after the other."""

    def __init__(self, index: int, ranges: list[ReadRange]) -> None:
        super().__init__([read_range.to_dict() for read_range in ranges])
        self.index = index
        self.ranges = ranges


class PulsarRangesReader(DataSourceReader):
    """Plans the Spark tasks (each some ranges) and reads each range with a Pulsar reader."""

    def __init__(self, spec: IngestJobSpec, schema: StructType, tasks: int) -> None:
        self.spec = spec
        self.schema = schema
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        ranges = self.spec.plan.ranges
        return [RangePartition(index, [ranges[i] for i in group]) for index, group in enumerate(task_ranges(ranges, self.tasks))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        client = _client(self.spec)
        rows = arrow_schema(self.schema)
        batches = (batch for read_range in partition.ranges for batch in self._read_range(client, rows, read_range))
        for batch in profiled(batches, f"task-{partition.index}"):
            yield batch
            if partition.index == 0:
                inject("mid-read")

    def _read_range(self, client: Client, rows: pa.Schema, read_range: ReadRange) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        decoder: ValueDecoder | None = None
        if spec.topic_schema is not None:
            decoder = registry_decoder(spec.topic_schema, value_fields(rows), client, read_range.topic)
        builder = RowBatchBuilder(
            rows,
            spec.value_format,
            spec.plan.partition(read_range.topic).source_topic,
            read_range.partition,
            spec.plan.batch_id,
            decoder,
        )
        return read_range_batches(client, read_range, builder, spec.read_timeout_seconds)


def _client(spec: IngestJobSpec) -> Client:
    key = json.dumps([spec.service_url, spec.client_settings, spec.auth.to_dict()], sort_keys=True)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = spec.client()
    return client


def read_range_batches(
    client: Client, read_range: ReadRange, builder: RowBatchBuilder, timeout_seconds: float
) -> Iterator[pa.RecordBatch]:
    """Read ``read_range`` and yield its rows, ``ROWS_PER_BATCH`` at a time.

    The reader starts after ``read_range.after`` and stops after the last message of the entry
    ``read_range.last``, or before the first entry that would take it past the message budget.
    Whole entries are taken up to a batch of messages at a time (``take_entries``), decoded together
    into columns (:func:`.entry_messages.entry_columns`), decided on one by one, added to the
    builder and acknowledged (so the broker forgets them) once per take.
    """
    reader = create_reader(
        client,
        read_range.topic,
        read_range.after.message_id(read_range.partition),
        receiver_queue_size=READER_QUEUE_SIZE,
        batch_receive_policy=TAKE,
    )
    consumer = reader.consumer
    selection = RangeSelection(read_range)
    try:
        deadline = time.monotonic() + timeout_seconds
        while not selection.done:
            entries = consumer.take_entries(selection.until)
            if not entries:
                if time.monotonic() > deadline:
                    raise RangeReadError(
                        f"no message within {timeout_seconds:g} s reading {read_range.topic} after "
                        f"{read_range.after} up to {read_range.last} ({selection.taken} read)"
                    )
                continue
            deadline = time.monotonic() + timeout_seconds
            last_added = selection.add(entries, builder)
            if last_added is not None:
                consumer.acknowledge_cumulative(last_added.last_message_id())
            # Takes and batches need not line up: Spark gets batches of ROWS_PER_BATCH.
            while len(builder) >= ROWS_PER_BATCH:
                yield builder.build(ROWS_PER_BATCH)
        if len(builder):
            yield builder.build()
    finally:
        reader.close()
    log.info("read %d messages of %s after %s up to %s", selection.taken, read_range.topic, read_range.after, read_range.last)


class RangeSelection:
    """Which received entries belong to a range, decided entry by entry; an entry is taken whole.

    A reader started after a whole entry may still get that entry's batched messages (the
    standalone broker starts at the entry itself), so entries up to ``after`` are skipped; an
    entry past ``last``, or one that would overrun the message budget, ends the range, as does
    the entry ``last`` itself. Entries with no message for the application are passed over. Brokers
    never deliver transaction markers or aborted messages: a range that ends with such entries
    ends at its ``last_message`` instead (at once, when that lies before the range).
    """

    def __init__(self, read_range: ReadRange) -> None:
        self.after = (read_range.after.ledger_id, read_range.after.entry_id)
        self.last = (read_range.last.ledger_id, read_range.last.entry_id)
        self.budget = read_range.message_budget
        #: Messages of the range taken so far.
        self.taken = 0
        # The entries that complete the range: its last, and the newest a reader is given where the
        # range ends with entries it never is.
        last_message = read_range.last_message
        self.ends = {self.last} | ({(last_message.ledger_id, last_message.entry_id)} if last_message is not None else set())
        #: The first of them a take may end at, as soon as it is in.
        self.until = min(self.ends)
        #: Whether the range is complete.
        self.done = last_message is not None and last_message <= read_range.after

    def add(self, entries: list[ReceivedEntry], builder: RowBatchBuilder) -> ReceivedEntry | None:
        """Add the messages of the range's entries among ``entries`` to ``builder``; the last
        entry added, if any."""
        columns = entry_columns(entries)
        rows = columns.rows.tolist()
        first = stop = 0  # entries[first:stop] are added: those skipped before, or without messages, add none
        budget = self.budget
        for index, entry in enumerate(entries):
            position = (entry.ledger_id, entry.entry_id)
            count = rows[index + 1] - rows[index]
            if position <= self.after:
                first = index + 1
                continue
            if not count:
                continue
            if position > self.last or (
                budget is not None and columns.first_index(index) <= 0 and self.taken
                and self.taken + entry.message_count() > budget
            ):
                self.done = True
                break
            self.taken += count
            stop = index + 1
            if position in self.ends and (
                entry.batch_size == 0 or columns.messages.indexes[rows[index + 1] - 1] >= entry.batch_size - 1
            ):
                self.done = True
                break
        if stop <= first:
            return None
        builder.add_entries(entries[first:stop], columns.select(first, stop))
        return entries[stop - 1]
