"""Failed group commits in the broker's storage, ledger and topic: the whole group rolls back, the
ledger is fenced until its entries in flight have settled, entry ids stay dense (no hole, none
twice, also after the database is opened again), and the topic closes its producers and forgets
the sequence ids it did not store. Real SQLite on a temporary directory, no broker process."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from airflow_pulsar.broker.client_limits import ClientLimits
from airflow_pulsar.broker.commit import Commit
from airflow_pulsar.broker.ledger import Ledger
from airflow_pulsar.broker.storage import LedgerFencedError, Storage, StoredEntry
from airflow_pulsar.broker.storage_faults import InjectedStorageFault, StorageFault, StorageFaultSwitch
from airflow_pulsar.broker.topic import ServerProducer, Topic
from airflow_pulsar.client.protocol.frames import encode_entry
from airflow_pulsar.client.protocol.PulsarApi_pb2 import MessageMetadata
from airflow_pulsar.client.topic_name import TopicName

LEDGER = 7


def entry(payload: bytes) -> StoredEntry:
    return StoredEntry(-1, 0, 1, 0, None, payload)


async def settled(commits: list[Commit]) -> list[BaseException | None]:
    while not all(commit.done() for commit in commits):
        await asyncio.sleep(0.001)
    return [commit.exception() for commit in commits]


@pytest.mark.parametrize("fault", list(StorageFault))
def test_a_failed_group_rolls_back_fences_the_ledger_and_leaves_no_hole(tmp_path: Path, fault: StorageFault) -> None:
    switch = StorageFaultSwitch(tmp_path / "fault")

    async def scenario() -> None:
        storage = Storage(tmp_path, fsync=False, faults=switch)
        storage.start(asyncio.get_running_loop())
        ledger = Ledger(storage, LEDGER)
        unfenced: list[int] = []
        ledger.on_unfenced.append(lambda: unfenced.append(ledger.next_entry_id))
        assert await settled([ledger.append(entry(b"a%d" % i), "p", i) for i in range(3)]) == [None] * 3
        switch.switch(fault)
        cursor_saved = storage.save_cursor(LEDGER, "sub", {"mark_delete": 2, "acked": [], "batch": {}})
        failed = [ledger.append(entry(b"b%d" % i), "p", 3 + i) for i in range(4)]
        errors = await settled(failed)
        assert all(isinstance(error, InjectedStorageFault | LedgerFencedError) for error in errors), errors
        assert isinstance(errors[0], InjectedStorageFault) and errors[0].fault is fault
        assert str(errors[0]) == fault.message
        with pytest.raises(sqlite3.OperationalError, match=fault.message):
            await cursor_saved  # in the same group: rolled back with it
        assert not ledger.fenced and unfenced == [3], "unfenced once settled, the next id right after the last committed"
        assert ledger.last_entry_id == 2 and storage.read_entries(LEDGER, 0, 100, 100)[-1].data == b"a2"
        switch.switch(None)
        resent = [entry(b"b%d" % i) for i in range(4)]
        assert await settled([ledger.append(e, "p", 3 + i) for i, e in enumerate(resent)]) == [None] * 4
        assert [e.entry_id for e in resent] == [3, 4, 5, 6]
        storage.close()

    asyncio.run(scenario())
    reopened = Storage(tmp_path, fsync=False)
    stored = reopened.read_entries(LEDGER, 0, 100, 100)
    assert [(e.entry_id, e.data) for e in stored] == [(i, p) for i, p in enumerate([b"a0", b"a1", b"a2", b"b0", b"b1", b"b2", b"b3"])]
    assert reopened.last_sequence_ids(LEDGER) == {"p": 6}
    assert reopened.load_cursors(LEDGER) == {}
    reopened.close()


def test_entries_queued_after_a_failed_group_are_refused_not_stored_after_a_gap(tmp_path: Path) -> None:
    switch = StorageFaultSwitch(tmp_path / "fault")

    async def scenario() -> None:
        storage = Storage(tmp_path, fsync=False, faults=switch)
        storage.start(asyncio.get_running_loop())
        ledger, other = Ledger(storage, LEDGER), Ledger(storage, LEDGER + 1)
        switch.switch(StorageFault.IO_ERROR)
        failing = ledger.append(entry(b"x0"), None, None)
        time.sleep(0.5)  # the loop held: the writer fails the group before the ledger hears of it
        switch.switch(None)
        later = ledger.append(entry(b"x1"), None, None)  # not fenced yet on this side: queued
        elsewhere = other.append(entry(b"y0"), None, None)
        errors = await settled([failing, later, elsewhere])
        assert isinstance(errors[0], InjectedStorageFault)
        assert isinstance(errors[1], LedgerFencedError), "a later entry of the failed ledger is refused, not stored after a gap"
        assert errors[2] is None, "another ledger's entry commits"
        assert not ledger.fenced and ledger.next_entry_id == 0
        assert await settled([ledger.append(entry(b"x1"), None, None)]) == [None]
        assert [(e.entry_id, e.data) for e in storage.read_entries(LEDGER, 0, 10, 10)] == [(0, b"x1")]
        storage.close()

    asyncio.run(scenario())


def test_the_size_cap_fails_commits_as_a_full_disk_and_freed_space_takes_them_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        storage = Storage(tmp_path, fsync=False, max_bytes=256 * 1024)
        storage.start(asyncio.get_running_loop())
        ledger, filler = Ledger(storage, LEDGER), Ledger(storage, LEDGER + 1)
        payload = bytes(4000)
        errors: list[BaseException | None] = [None]
        while errors == [None]:
            errors = await settled([filler.append(entry(payload), None, None)])
        assert isinstance(errors[0], sqlite3.OperationalError) and str(errors[0]) == "database or disk is full"
        assert filler.last_entry_id > 10
        refused = await settled([ledger.append(entry(payload), None, None)])
        assert isinstance(refused[0], sqlite3.OperationalError), "full for every topic"
        await storage.delete_topic("filler", LEDGER + 1)
        assert await settled([ledger.append(entry(payload), None, None)]) == [None]
        assert ledger.last_entry_id == 0
        storage.close()

    asyncio.run(scenario())


class RecordingSink:
    """The producer's connection side: records the producers the topic closes."""

    remote_address = "127.0.0.1:1"

    def __init__(self) -> None:
        self.closed: list[int] = []

    def close_producer(self, producer_id: int) -> None:
        self.closed.append(producer_id)

    def drop_producer(self, producer_id: int) -> None:
        self.closed.append(producer_id)


def test_a_failed_write_closes_the_producers_and_its_duplicate_fails_with_it(tmp_path: Path) -> None:
    switch = StorageFaultSwitch(tmp_path / "fault")

    async def scenario() -> None:
        storage = Storage(tmp_path, fsync=False, faults=switch)
        storage.start(asyncio.get_running_loop())
        name = TopicName.parse("persistent://public/default/t")
        topic = Topic(name, storage, Ledger(storage, LEDGER), dedup=True, limits=ClientLimits())
        sink = RecordingSink()
        producer = ServerProducer(sink, 1, "p")
        await topic.add_producer(producer)
        outcomes: list[tuple[int, tuple[int, int] | None, BaseException | None]] = []

        def publish(sequence_id: int) -> None:
            data = encode_entry(MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=1), b"x")
            topic.publish(producer, sequence_id, sequence_id, 1, 0, data, lambda at, error: outcomes.append((sequence_id, at, error)))

        publish(0)
        while len(outcomes) < 1:
            await asyncio.sleep(0.001)
        switch.switch(StorageFault.DISK_FULL)
        publish(1)
        publish(1)  # a resend while the original is in flight: it waits for the original's outcome
        while len(outcomes) < 3:
            await asyncio.sleep(0.001)
        receipts = [(seq, at) for seq, at, _ in outcomes]
        assert receipts == [(0, (LEDGER, 0)), (1, None), (1, None)], "no receipt for a failed entry or its duplicate"
        assert sink.closed == [1] and topic.producers == [], "as Pulsar: the producers are closed to resend"
        assert topic.last_sequence_id("p") == 0
        switch.switch(None)
        await topic.add_producer(producer)  # the ledger has settled: producers come back
        publish(1)  # the resend is new again, not a duplicate of what failed
        while len(outcomes) < 4:
            await asyncio.sleep(0.001)
        assert outcomes[-1][:2] == (1, (LEDGER, 1))
        assert topic.last_sequence_id("p") == 1
        storage.close()

    asyncio.run(scenario())
