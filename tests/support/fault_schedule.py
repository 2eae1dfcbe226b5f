"""Seeded fault schedules: a list of timed faults drawn from ``random.Random(seed)``, so that a seed
names one run and replays it (``FAULT_SEEDS=7 make fault-run``).

The faults: the broker killed with -9 or stopped and started again; a producer or consumer process
killed with -9 and started again under the same name; every proxied connection cut; all traffic
stalled (held, then delivered); a partition (every connection open during it goes silent both ways
for good, left open: its ends must notice).
Faults on the network and the broker come one after another; a client's kill overlaps whatever
follows it, since the process comes back after its own down time.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

BROKER_KILL = "broker-kill"
BROKER_RESTART = "broker-restart"
PRODUCER_KILL = "producer-kill"
CONSUMER_KILL = "consumer-kill"
CUT = "cut"
STALL = "stall"
PARTITION = "partition"

# Relative frequencies. A broker event at most once a schedule: Apache Pulsar takes 20 to 60 s to
# start again on a loaded machine, which is the length of a whole schedule.
_WEIGHTS = {CUT: 3, STALL: 2, PARTITION: 2, PRODUCER_KILL: 3, CONSUMER_KILL: 3, BROKER_KILL: 1, BROKER_RESTART: 1}
# (shortest, longest) seconds a fault lasts: the down time of a killed process, the length of a
# stall or a partition. A cut is instant.
_DURATIONS = {
    CUT: (0.0, 0.0),
    STALL: (0.5, 4.0),
    PARTITION: (1.0, 8.0),
    PRODUCER_KILL: (0.0, 4.0),
    CONSUMER_KILL: (0.0, 4.0),
    BROKER_KILL: (0.0, 3.0),
    BROKER_RESTART: (0.0, 1.0),
}
_GAP = (0.5, 4.0)  # seconds between the end of one fault and the next
_QUIET_START = 2.0  # the stream runs this long before the first fault

# Between them every kind of fault, the broker's kill -9 included.
DEFAULT_SEEDS = "1,2,5"
DEFAULT_SECONDS = 40.0


@dataclass(frozen=True)
class FaultEvent:
    """One fault: at ``at`` seconds from the start, ``kind`` on ``target`` (a client's index, for the
    client kills), lasting ``duration`` seconds."""

    at: float
    kind: str
    target: int
    duration: float

    @property
    def label(self) -> str:
        """The kind, with the target of a client's kill."""
        return f"{self.kind} #{self.target}" if self.kind in (PRODUCER_KILL, CONSUMER_KILL) else self.kind

    def __str__(self) -> str:
        return f"{self.at:6.2f}s {self.label} for {self.duration:.2f}s"


def make_schedule(seed: int, seconds: float, producers: int, consumers: int) -> list[FaultEvent]:
    """The faults of ``seed`` over a run of ``seconds``, in time order."""
    rng = random.Random(seed)
    kinds = list(_WEIGHTS)
    events: list[FaultEvent] = []
    at = _QUIET_START + rng.uniform(0, _GAP[1])
    broker_events = 0
    while at < seconds:
        kind = rng.choices(kinds, weights=[_WEIGHTS[k] for k in kinds])[0]
        if kind in (BROKER_KILL, BROKER_RESTART):
            if broker_events:
                continue
            broker_events += 1
        target = rng.randrange(producers if kind == PRODUCER_KILL else consumers if kind == CONSUMER_KILL else 1)
        duration = round(rng.uniform(*_DURATIONS[kind]), 2)
        events.append(FaultEvent(round(at, 2), kind, target, duration))
        # A client comes back on its own: the next fault may come while it is down.
        busy = 0.0 if kind in (PRODUCER_KILL, CONSUMER_KILL) else duration
        at += busy + rng.uniform(*_GAP)
    return events


def describe(seed: int, schedule: list[FaultEvent]) -> str:
    """The schedule as text, with how to replay it."""
    lines = [f"fault schedule of seed {seed} (replay: FAULT_SEEDS={seed} make fault-run):"]
    lines += [f"  {event}" for event in schedule]
    return "\n".join(lines)


def seeds() -> list[int]:
    """The seeds to run: FAULT_SEEDS (comma-separated), else 1, 2, 5."""
    return [int(s) for s in os.environ.get("FAULT_SEEDS", DEFAULT_SEEDS).split(",") if s.strip()]


def run_seconds() -> float:
    """How long each schedule runs: FAULT_SECONDS, else 40."""
    return float(os.environ.get("FAULT_SECONDS", DEFAULT_SECONDS))
