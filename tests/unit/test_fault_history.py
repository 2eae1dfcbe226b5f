"""The fault run's schedule generator and history checker (tests/support): a seed replays its
schedule, and the checker finds each broken guarantee in a history written as the actor processes
write theirs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from airflow_pulsar.client.protocol.message_id import MessageId
from tests.support import fault_schedule as faults
from tests.support.fault_history import BrokerKills, SubscriptionHistory, check_history
from tests.support.reliability_checks import stamp

PARTITION = "persistent://public/default/t-partition-0"
NO_KILLS = BrokerKills([], acks_survive=True)


def test_a_seed_replays_its_schedule_and_seeds_differ() -> None:
    schedules = {seed: faults.make_schedule(seed, 40, 2, 2) for seed in range(30)}
    assert faults.make_schedule(7, 40, 2, 2) == schedules[7]
    assert len({tuple(s) for s in schedules.values()}) == 30
    for schedule in schedules.values():
        assert [e.at for e in schedule] == sorted(e.at for e in schedule)
        assert all(0 < e.at < 40 for e in schedule)
        assert sum(e.kind in (faults.BROKER_KILL, faults.BROKER_RESTART) for e in schedule) <= 1
    kinds = {e.kind for s in schedules.values() for e in s}
    assert kinds == {faults.CUT, faults.STALL, faults.PARTITION, faults.PRODUCER_KILL, faults.CONSUMER_KILL,
                     faults.BROKER_KILL, faults.BROKER_RESTART}
    assert "FAULT_SEEDS=7" in faults.describe(7, schedules[7])


def _write(path: Path, *events: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + '{"ev": "recv", "t"')  # a line a kill cut short
    return path


def _stored(*seqs: int) -> dict[str, list[tuple[bytes, MessageId]]]:
    return {PARTITION: [(stamp(0, seq), MessageId(0, 1, entry)) for entry, seq in enumerate(seqs)]}


def _producer(tmp_path: Path, *receipted: int) -> dict[int, Path]:
    events = [{"ev": "start", "t": 0.0, "first": 0}]
    events += [{"ev": "receipt", "t": 1.0, "seq": seq, "id": [0, 1, seq, -1]} for seq in receipted]
    return {0: _write(tmp_path / "producer-0.jsonl", *events)}


def _consumer(tmp_path: Path, name: str, receipts: bool, *events: dict[str, Any]) -> SubscriptionHistory:
    return SubscriptionHistory.read(name, receipts, _write(tmp_path / f"consumer-{name}.jsonl", *events))


def _recv(seq: int, t: float, batch: int = -1) -> dict[str, Any]:
    return {"ev": "recv", "t": t, "m": stamp(0, seq).decode(), "id": [0, 1, seq, batch], "redeliveries": 0}


def _ack(seq: int, t: float) -> dict[str, Any]:
    return {"ev": "ack", "t": t, "m": stamp(0, seq).decode()}


def test_a_clean_history_passes(tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, "receipts", True, {"ev": "start", "t": 0.0}, _recv(0, 2), _ack(0, 3), _recv(1, 4), _ack(1, 5))
    report = check_history(_stored(0, 1), _producer(tmp_path, 0, 1), [consumer], NO_KILLS)
    assert report.failures == []
    assert report.figures["stored"] == report.figures["receipts"] == 2


def test_a_lost_acknowledged_send_and_a_duplicate_are_found(tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, "plain", False, {"ev": "start", "t": 0.0}, _recv(0, 2), _recv(0, 3))
    report = check_history(_stored(0, 0), _producer(tmp_path, 0, 1), [consumer], NO_KILLS)
    assert any("stored more than once" in f for f in report.failures)
    report = check_history(_stored(0), _producer(tmp_path, 0, 1), [consumer], NO_KILLS)
    assert any("acknowledged messages lost" in f for f in report.failures)


def test_undelivered_and_out_of_order_deliveries_are_found(tmp_path: Path) -> None:
    # Key k0 holds sequences 0 and 8 (KEYS = 8): 8 before 0 goes back within one process.
    consumer = _consumer(tmp_path, "plain", False, {"ev": "start", "t": 0.0}, _recv(8, 2), _recv(0, 3))
    report = check_history(_stored(0, 8, 9), _producer(tmp_path), [consumer], NO_KILLS)
    assert any("never delivered" in f and "p0-0000009" in f for f in report.failures)
    assert any("got p0-0000000 after p0-0000008" in f for f in report.failures)


def test_a_receipted_ack_delivered_to_a_later_process_is_a_lost_ack_only_with_receipts(tmp_path: Path) -> None:
    events = ({"ev": "start", "t": 0.0}, _recv(0, 2), _ack(0, 3), {"ev": "start", "t": 4.0}, _recv(0, 5))
    with_receipts = check_history(_stored(0), _producer(tmp_path), [_consumer(tmp_path, "receipts", True, *events)], NO_KILLS)
    assert any("acknowledged with a receipt" in f for f in with_receipts.failures)
    without = check_history(_stored(0), _producer(tmp_path), [_consumer(tmp_path, "plain", False, *events)], NO_KILLS)
    assert without.failures == [] and without.figures["plain_redelivered"] == 1
    # A broker kill between the receipt and the delivery excuses it where receipted acks do not
    # survive a kill (Apache Pulsar), not where they do.
    consumer = _consumer(tmp_path, "receipts", True, *events)
    lossy = check_history(_stored(0), _producer(tmp_path), [consumer], BrokerKills([3.5], acks_survive=False))
    assert lossy.failures == [] and lossy.figures["receipts_again_after_broker_kill"] == 1
    durable = check_history(_stored(0), _producer(tmp_path), [consumer], BrokerKills([3.5], acks_survive=True))
    assert any("acknowledged with a receipt" in f for f in durable.failures)
    before = check_history(_stored(0), _producer(tmp_path), [consumer], BrokerKills([2.5], acks_survive=False))
    assert any("acknowledged with a receipt" in f for f in before.failures)
    # A batch member's ack persists only with its whole batch: not held to the rule.
    batched = ({"ev": "start", "t": 0.0}, _recv(0, 2, batch=0), _ack(0, 3), {"ev": "start", "t": 4.0}, _recv(0, 5, batch=0))
    assert check_history(_stored(0), _producer(tmp_path), [_consumer(tmp_path, "receipts", True, *batched)], NO_KILLS).failures == []
