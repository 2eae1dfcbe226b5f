"""The checker of a fault run: it reads the whole history the producer and consumer processes wrote
(``tests.support.fault_actors``) and what the topic stores, and lists every broken guarantee.

* Every send the producer holds a receipt for is stored, each message once, each producer's
  messages in sequence order within a partition (so each key's in order), each receipt's message
  id where the message is stored (``reliability_checks.check_exactly_once_in_order``).
* Every stored message is delivered on each subscription; nothing else is.
* Each consumer process receives each key's messages in order (a message's first delivery to the
  process; redeliveries after a reconnect come again from the subscription's acknowledged point).
* Acknowledgements: on a subscription whose consumers wait for ack receipts, a message acknowledged
  with a receipt is never delivered to a consumer process started after the receipt. Apache
  Pulsar's receipt says the broker applied the acknowledgement to the cursor, which it persists at
  most once a second (``managedLedgerDefaultMarkDeleteRateLimit``) and otherwise with the next
  flush of dirty cursors (``managedLedgerCursorPositionFlushSeconds``, 60 s) or the cursor's close:
  a broker killed with -9 in between delivers those messages again. So unless the broker's
  acknowledgements survive its kill (the embedded broker commits them before the receipt), a kill
  between the receipt and the delivery excuses it; such deliveries are counted. A message of a batch
  is held to this only as a whole batch, and these consumers acknowledge batch members one by one
  without batch index acknowledgements, so batched messages are left out. Without receipts an
  acknowledgement may be lost with the connection: redelivery is at-least-once, and only counted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_pulsar.client.protocol.message_id import MessageId
from tests.support.fault_actors import KEYS
from tests.support.reliability_checks import SendLog, check_exactly_once_in_order, stamp, unstamp


def read_history(path: Path) -> list[dict[str, Any]]:
    """The events of one history file; a last line cut short by a kill is skipped."""
    events = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def send_log(producer_histories: dict[int, Path]) -> tuple[SendLog, Counter[str]]:
    """What the producers were told, by payload (a receipt with a stored id over a duplicate's
    (-1, -1)), and counts of sends, receipts, failures and process starts."""
    log = SendLog()
    counts: Counter[str] = Counter()
    for index, path in producer_histories.items():
        for event in read_history(path):
            counts[event["ev"]] += 1
            if event["ev"] == "receipt":
                partition, ledger, entry, batch = event["id"]
                payload = stamp(index, event["seq"])
                known = log.acked.get(payload)
                if known is None or known.ledger_id() < 0:
                    log.acked[payload] = MessageId(partition, ledger, entry, batch)
    return log, counts


@dataclass
class SubscriptionHistory:
    """The deliveries on one subscription: per consumer process (incarnation), in order."""

    name: str
    receipts: bool
    incarnations: list[float] = field(default_factory=list)  # start times
    deliveries: list[tuple[int, str, bool, float]] = field(default_factory=list)  # incarnation, payload, batched, time
    acked: dict[str, float] = field(default_factory=dict)  # payload: time of its first (confirmed) ack

    @classmethod
    def read(cls, name: str, receipts: bool, path: Path) -> SubscriptionHistory:
        """Parse a consumer's history file."""
        history = cls(name, receipts)
        for event in read_history(path):
            if event["ev"] == "start":
                history.incarnations.append(event["t"])
            elif event["ev"] == "recv":
                batched = event["id"][3] >= 0
                history.deliveries.append((len(history.incarnations) - 1, event["m"], batched, event["t"]))
            elif event["ev"] == "ack":
                history.acked.setdefault(event["m"], event["t"])
        return history

    def delivered(self) -> set[str]:
        """Every payload delivered at least once."""
        return {payload for _, payload, _, _ in self.deliveries}


def _order_breaks(history: SubscriptionHistory) -> list[str]:
    """Keys whose first deliveries to one process go back in sequence."""
    breaks = []
    last: dict[tuple[int, int, int], int] = {}
    seen: set[tuple[int, str]] = set()
    for incarnation, payload, _, _ in history.deliveries:
        if (incarnation, payload) in seen:
            continue
        seen.add((incarnation, payload))
        producer, seq = unstamp(payload.encode())
        key = (incarnation, producer, seq % KEYS)
        if seq < last.get(key, -1):
            breaks.append(f"{history.name}: process {incarnation} got {payload} after p{producer}-{last[key]:07d} (key k{seq % KEYS})")
        last[key] = max(seq, last.get(key, -1))
    return breaks


@dataclass(frozen=True)
class BrokerKills:
    """When the broker was killed with -9 (Unix times), and whether acknowledgements it confirmed
    with a receipt survive that."""

    times: list[float]
    acks_survive: bool

    def excuse(self, acked_at: float, delivered_at: float) -> bool:
        """Whether a kill between an acknowledgement and a delivery may have lost it."""
        return not self.acks_survive and any(acked_at < kill < delivered_at for kill in self.times)


def _lost_acks(history: SubscriptionHistory, kills: BrokerKills) -> tuple[list[str], int, int]:
    """Deliveries to a later process of what was acknowledged with a receipt; how many such came
    after a broker kill that may lose them; and how many times a process got again what it had
    itself acknowledged with a receipt (allowed: dispatched before)."""
    lost, after_kill, again_same_process = [], 0, 0
    for incarnation, payload, batched, at in history.deliveries:
        acked_at = history.acked.get(payload)
        if acked_at is None or batched or acked_at >= at:
            continue
        if kills.excuse(acked_at, at):
            after_kill += 1
        elif history.incarnations[incarnation] > acked_at:
            lost.append(f"{history.name}: {payload} acknowledged with a receipt at {acked_at:.3f}, delivered again at {at:.3f} "
                        f"to process {incarnation} started at {history.incarnations[incarnation]:.3f}")
        else:
            again_same_process += 1
    return lost, after_kill, again_same_process


@dataclass
class FaultRunReport:
    """What a fault run found: figures for the summary and every broken guarantee."""

    figures: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def check_history(
    stored: dict[str, list[tuple[bytes, MessageId]]],
    producer_histories: dict[int, Path],
    subscriptions: list[SubscriptionHistory],
    kills: BrokerKills,
) -> FaultRunReport:
    """Check everything in the module's docstring; ``stored`` is every partition's messages in order."""
    report = FaultRunReport()
    log, counts = send_log(producer_histories)
    try:
        check_exactly_once_in_order(stored, log)
    except AssertionError as exc:
        report.failures.append(f"storage: {exc}")
    everything = {data.decode() for messages in stored.values() for data, _ in messages}
    report.figures.update(
        stored=len(everything), sent=counts["send"], receipts=len(log.acked), failed_sends=counts["fail"],
        producer_starts=counts["start"], deduplicated=log.deduplicated(),
    )
    for history in subscriptions:
        delivered = history.delivered()
        undelivered, phantom = everything - delivered, delivered - everything
        if undelivered:
            report.failures.append(f"{history.name}: {len(undelivered)} stored messages never delivered, e.g. {sorted(undelivered)[:5]}")
        if phantom:
            report.failures.append(f"{history.name}: {len(phantom)} delivered messages not stored, e.g. {sorted(phantom)[:5]}")
        report.failures += _order_breaks(history)[:10]
        redelivered = len(history.deliveries) - len(delivered)
        report.figures[f"{history.name}_processes"] = len(history.incarnations)
        report.figures[f"{history.name}_redelivered"] = redelivered
        if history.receipts:
            lost, after_kill, again = _lost_acks(history, kills)
            report.failures += lost[:10]
            if len(lost) > 10:
                report.failures.append(f"{history.name}: {len(lost) - 10} more acknowledgements lost")
            report.figures[f"{history.name}_again_after_own_ack"] = again
            report.figures[f"{history.name}_again_after_broker_kill"] = after_kill
    return report
