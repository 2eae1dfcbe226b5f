"""One fault run: producer and consumer processes stream through a partitioned topic with
deduplication, by way of a fault proxy, while a seeded schedule (``tests.support.fault_schedule``)
kills and restarts them and the broker, and cuts, stalls and partitions their connections. At the
end every fault is lifted, the producers finish, the consumers drain the subscriptions, and the
checker (``tests.support.fault_history``) reads the whole history.

Two producers (one batching, one not) and two consumer processes, one on a subscription whose
acknowledgements wait for the broker's receipt and one on a subscription without receipts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from airflow_pulsar.client import InitialPosition
from airflow_pulsar.client.admin import PulsarAdmin
from airflow_pulsar.client.client import Client
from tests.support import fault_schedule as faults
from tests.support.fault_history import BrokerKills, FaultRunReport, SubscriptionHistory, check_history
from tests.support.fault_proxy import FaultProxy
from tests.support.polling import wait_until
from tests.support.reliability_checks import read_all_official, read_all_ours

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2
PRODUCERS = ("batched", "unbatched")
SUBSCRIPTIONS = (("receipts", True), ("plain", False))
AUDIT = "audit"
RATE = 100  # messages a second per producer
# After the schedule: how long the producers may take to flush, and the consumers to drain.
FINISH_SECONDS = 240
# Whether acknowledgements a broker confirmed with a receipt survive its kill -9, by broker name: the
# embedded broker commits them first; Apache Pulsar persists cursors later (tests/support/fault_history.py).
ACKS_SURVIVE_KILL = {"embedded": True, "pulsar": False}


class ControlledBroker(Protocol):
    """What a fault run does to the broker under test (``BrokerProcess`` or ``PulsarStandalone``)."""

    name: str
    port: int
    service_url: str
    web_url: str

    def kill(self) -> None: ...
    def stop(self) -> int: ...
    def start(self) -> Any: ...


class Actor:
    """One producer or consumer process of the run, which a schedule kills and starts again."""

    def __init__(self, name: str, args: list[str], work_dir: Path):
        self.name = name
        self.args = args
        self.stderr_path = work_dir / f"{name}.stderr"
        self.popen: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.crashes: list[str] = []  # how each process that exited on its own with an error ended

    @property
    def killed(self) -> bool:
        """Whether its last process was killed (and not started again)."""
        return self.popen is not None and self.popen.returncode == -signal.SIGKILL

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        """Start the process (``python -m tests.support.fault_actors ...``) unless it runs."""
        if self.running:
            return
        self._note_crash()
        with open(self.stderr_path, "ab") as stderr:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "tests.support.fault_actors", *self.args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr
            )

    def kill(self) -> bool:
        """kill -9, if it runs; whether it did."""
        if not self.running:
            return False
        assert self.popen is not None
        os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)
        self.kills += 1
        return True

    def _note_crash(self) -> None:
        """Keep its stderr's tail if its last process exited on its own with an error."""
        if self.popen is not None and self.popen.poll() not in (None, 0, -signal.SIGKILL):
            self.crashes.append(f"{self.name} exited with {self.popen.returncode}: {self.stderr_path.read_text()[-2000:]}")

    def stop(self) -> None:
        """kill -9 at the run's end, noting first whether it had crashed."""
        self._note_crash()
        if self.running:
            assert self.popen is not None
            self.popen.kill()
            self.popen.wait(10)


class FaultRun:
    """The run of one seed's schedule against ``broker``; :meth:`run` returns the checker's report."""

    def __init__(self, broker: ControlledBroker, seed: int, seconds: float, work_dir: Path):
        self.broker = broker
        self.seed = seed
        self.seconds = seconds
        self.work_dir = work_dir
        self.schedule = faults.make_schedule(seed, seconds, len(PRODUCERS), len(SUBSCRIPTIONS))
        self.topic = f"persistent://public/fault-{seed}-{uuid.uuid4().hex[:8]}/stream"
        self.proxy = FaultProxy("127.0.0.1", broker.port)
        self.producers: list[Actor] = []
        self.consumers: list[Actor] = []
        self._restarts: list[threading.Timer] = []
        self.applied: list[str] = []  # each fault as it was applied: when, and what it found
        self.broker_kills: list[float] = []  # Unix times

    def describe(self) -> str:
        """The seed's schedule and how it went, for a failure message."""
        return faults.describe(self.seed, self.schedule) + "\napplied:\n" + "\n".join(f"  {line}" for line in self.applied)

    def run(self) -> FaultRunReport:
        """Set up, run the schedule, finish, check."""
        self._create_topic()
        self.proxy.start()
        try:
            deadline = time.time() + self.seconds
            self._start_actors(deadline)
            self._play_schedule()
            time.sleep(max(0.0, deadline - time.time()))
            return self._finish()
        finally:
            for timer in self._restarts:
                timer.cancel()
            for actor in self.producers + self.consumers:
                actor.stop()
            self.proxy.close()

    def _create_topic(self) -> None:
        namespace = self.topic.removeprefix("persistent://").rsplit("/", 1)[0]
        with PulsarAdmin(self.broker.web_url) as admin:
            admin.create_namespace(namespace)
            admin.set_namespace_deduplication(namespace, True)
            admin.create_partitioned_topic(self.topic, PARTITIONS)
            # AUDIT is never read: it keeps Apache Pulsar from trimming ledgers every subscription
            # acknowledged, so the check reads back everything stored.
            for name in [AUDIT] + [name for name, _ in SUBSCRIPTIONS]:
                admin.create_subscription(self.topic, name, InitialPosition.Earliest)
            for partition in self._partitions():
                wait_until(
                    lambda partition=partition: admin.topic_stats(partition).get("deduplicationStatus") == "Enabled",
                    f"deduplication on {partition}",
                    timeout=30,
                )

    def _partitions(self) -> list[str]:
        namespace_topic = self.topic.removeprefix("persistent://")
        return [f"persistent://{namespace_topic}-partition-{i}" for i in range(PARTITIONS)]

    def _history(self, name: str) -> Path:
        return self.work_dir / f"{name}.jsonl"

    def _start_actors(self, deadline: float) -> None:
        url = self.proxy.service_url
        for index, batching in enumerate(PRODUCERS):
            args = ["producer", url, self.topic, str(index), str(self._history(f"producer-{index}")), str(deadline), str(RATE), batching]
            self.producers.append(Actor(f"producer-{index}", args, self.work_dir))
        for name, receipts in SUBSCRIPTIONS:
            args = ["consumer", url, self.topic, name, str(self._history(f"consumer-{name}")), "receipts" if receipts else "plain"]
            self.consumers.append(Actor(f"consumer-{name}", args, self.work_dir))
        for actor in self.consumers + self.producers:
            actor.start()

    def _play_schedule(self) -> None:
        began = time.monotonic()
        for event in self.schedule:
            time.sleep(max(0.0, began + event.at - time.monotonic()))
            at = time.monotonic() - began
            outcome = self._apply(event)
            self.applied.append(f"{at:6.2f}s {event.label}: {outcome} (until {time.monotonic() - began:.2f}s)")

    def _apply(self, event: faults.FaultEvent) -> str:
        """Apply one fault (and lift it, unless it is a client's kill); what it found."""
        if event.kind in (faults.PRODUCER_KILL, faults.CONSUMER_KILL):
            actor = (self.producers if event.kind == faults.PRODUCER_KILL else self.consumers)[event.target]
            if not actor.kill():
                return f"{actor.name} not running"
            timer = threading.Timer(event.duration, actor.start)
            self._restarts.append(timer)
            timer.start()
            return f"{actor.name} killed"
        if event.kind == faults.CUT:
            return f"{self.proxy.cut_all()} connections cut"
        if event.kind == faults.STALL:
            self.proxy.stall()
            time.sleep(event.duration)
            self.proxy.resume()
            return "lifted"
        if event.kind == faults.PARTITION:
            self.proxy.partition()
            time.sleep(event.duration)
            self.proxy.heal()
            return "healed"
        if event.kind == faults.BROKER_KILL:
            self.broker_kills.append(time.time())
            self.broker.kill()
        else:
            self.broker.stop()
        time.sleep(event.duration)
        self.broker.start()
        return "broker started again"

    def _finish(self) -> FaultRunReport:
        """Lift the faults, let the producers finish and the consumers drain, and check the history."""
        for timer in self._restarts:
            timer.join()
        report = FaultRunReport()
        for producer in self.producers:
            if producer.killed:
                producer.start()  # killed near the end: it comes back and exits at once
        for producer in self.producers:
            assert producer.popen is not None
            try:
                producer.popen.wait(FINISH_SECONDS)
            except subprocess.TimeoutExpired:
                report.failures.append(f"{producer.name} did not finish within {FINISH_SECONDS} s of the schedule's end")
        for actor in self.consumers:
            actor.start()  # killed near the end, or crashed (which is reported)
        with Client(self.broker.service_url, operation_timeout_seconds=30) as client:
            stored = {name: read_all_ours(client, name) for name in self._partitions()}
        for name, messages in stored.items():
            if read_all_official(self.broker.service_url, name) != [data for data, _ in messages]:
                report.failures.append(f"{name}: the official client reads back other messages than ours")
        everything = {data.decode() for messages in stored.values() for data, _ in messages}
        histories = self._drain(everything)
        for actor in self.producers + self.consumers:
            actor.stop()
            report.failures += actor.crashes
        producer_histories = {index: self._history(f"producer-{index}") for index in range(len(PRODUCERS))}
        kills = BrokerKills(self.broker_kills, ACKS_SURVIVE_KILL[self.broker.name])
        checked = check_history(stored, producer_histories, histories, kills)
        checked.failures = report.failures + checked.failures
        checked.figures["producer_kills"] = sum(actor.kills for actor in self.producers)
        checked.figures["consumer_kills"] = sum(actor.kills for actor in self.consumers)
        checked.figures["proxy_faults"] = self.proxy.faults
        return checked

    def _drain(self, everything: set[str]) -> list[SubscriptionHistory]:
        """Wait until each subscription delivered every stored message (or time runs out)."""
        deadline = time.monotonic() + FINISH_SECONDS
        while True:
            histories = [
                SubscriptionHistory.read(name, receipts, self._history(f"consumer-{name}")) for name, receipts in SUBSCRIPTIONS
            ]
            if all(everything <= history.delivered() for history in histories) or time.monotonic() > deadline:
                time.sleep(1.0)  # a redelivery still under way is part of the history too
                return [
                    SubscriptionHistory.read(name, receipts, self._history(f"consumer-{name}")) for name, receipts in SUBSCRIPTIONS
                ]
            time.sleep(0.5)

