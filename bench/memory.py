"""Memory bounds: producer RSS against a stalled broker, consumer RSS against a large backlog.

Each client runs in its own child process so its resident set is measured alone:

- producer: the broker is stopped with SIGSTOP, then the child sends 1 KiB messages as fast as
  it can with ``block_if_queue_full``; its RSS growth must stay within the client's
  ``memory_limit_bytes`` plus a constant, however long the stall lasts;
- consumer: with a backlog of 10 KiB messages, the child subscribes with a receiver queue of
  ``--queue`` messages and receives nothing; prefetching stops at the queue, so RSS growth stays
  near ``queue * message size`` no matter how large the backlog is.

Usage::

    python bench/memory.py [--limit-mib 64] [--queue 500] [--stall-seconds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


# ---- the child side -------------------------------------------------------------------------


def _client(kind: str, service_url: str, limit: int) -> Any:
    if kind == "official":
        import pulsar

        # Its Python API cannot set the memory limit: the C++ core's default (64 MiB) applies.
        return pulsar, pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    import airflow_pulsar.client as ours

    return ours, ours.Client(service_url, memory_limit_bytes=limit)


def child_producer(kind: str, service_url: str, topic: str, limit: int) -> None:
    """Create the producer, say ready, then send until killed (the broker is stalled meanwhile)."""
    module, client = _client(kind, service_url, limit)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=10, block_if_queue_full=True,
        max_pending_messages=1_000_000, max_pending_messages_across_partitions=1_000_000, send_timeout_millis=0,
    )
    payload = b"p" * 1024
    print("ready", flush=True)
    sys.stdin.readline()
    while True:
        producer.send_async(payload, None)


def child_consumer(kind: str, service_url: str, topic: str, queue: int) -> None:
    """Subscribe from the earliest message with a receiver queue of ``queue`` and receive nothing."""
    module, client = _client(kind, service_url, 64 * MIB)
    print("ready", flush=True)
    sys.stdin.readline()
    client.subscribe(
        topic, f"memory-{kind}", receiver_queue_size=queue, initial_position=module.InitialPosition.Earliest
    )
    print("subscribed", flush=True)
    sys.stdin.readline()


# ---- the parent side ------------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        raise RuntimeError(f"child {args} did not start")
    return child


def _finish(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait()


def producer_growth(broker: Any, kind: str, limit: int, stall: float) -> int:
    """RSS growth of a producer sending into a stalled broker for ``stall`` seconds."""
    child = _spawn("producer", kind, broker.service_url, f"memory-producer-{kind}", str(limit))
    try:
        base = rss_bytes(child.pid)
        broker.process.send_signal(signal.SIGSTOP)
        try:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            peak = base
            deadline = time.monotonic() + stall
            while time.monotonic() < deadline:
                peak = max(peak, rss_bytes(child.pid))
                time.sleep(0.05)
        finally:
            broker.process.send_signal(signal.SIGCONT)
        return peak - base
    finally:
        _finish(child)


def consumer_growth(broker: Any, kind: str, topic: str, queue: int, settle: float) -> int:
    """RSS growth of a consumer that subscribes to a large backlog and receives nothing."""
    child = _spawn("consumer", kind, broker.service_url, topic, str(queue))
    try:
        base = rss_bytes(child.pid)
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        child.stdout.readline()
        time.sleep(settle)  # prefetch fills the receiver queue, then stops
        return rss_bytes(child.pid) - base
    finally:
        _finish(child)


def write_backlog(broker: Any, topic: str, messages: int, size: int) -> None:
    """A backlog of ``messages`` messages of ``size`` bytes, written with our producer."""
    import airflow_pulsar.client as ours

    with ours.Client(broker.service_url) as client:
        producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        payload = b"c" * size
        for _ in range(messages):
            producer.send_async(payload, None)
        producer.flush()


def measure(limit_mib: int, queue: int, stall: float, backlog: int) -> list[dict[str, Any]]:
    """Run both memory figures for both clients; one row per figure."""
    from airflow_pulsar.broker.process import BrokerProcess

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as data_dir:
        broker = BrokerProcess(Path(data_dir), "--no-fsync").start()
        try:
            limit = limit_mib * MIB
            growth = {kind: producer_growth(broker, kind, limit, stall) for kind in ("official", "ours")}
            rows.append({"figure": f"producer RSS growth, stalled broker, limit {limit_mib} MiB (MiB)",
                         "official": round(growth["official"] / MIB, 1), "ours": round(growth["ours"] / MIB, 1),
                         "bound": limit_mib + 32, "lower_is_better": True})
            size = 10 * 1024
            write_backlog(broker, "memory-backlog", backlog, size)
            growth = {kind: consumer_growth(broker, kind, "memory-backlog", queue, 2.0) for kind in ("official", "ours")}
            rows.append({"figure": f"consumer RSS growth, queue {queue} x 10 KiB, backlog {backlog} (MiB)",
                         "official": round(growth["official"] / MIB, 1), "ours": round(growth["ours"] / MIB, 1),
                         "bound": round(queue * size / MIB + 32, 1), "lower_is_better": True})
        finally:
            broker.stop()
    return rows


def main() -> None:
    """Print the memory figures of both clients and the bound each must keep."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        role, kind, url, topic, number = sys.argv[2:7]
        (child_producer if role == "producer" else child_consumer)(kind, url, topic, int(number))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-mib", type=int, default=64, help="our limit; the official client's is fixed at 64")
    parser.add_argument("--queue", type=int, default=500)
    parser.add_argument("--stall-seconds", type=float, default=4.0)
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = measure(args.limit_mib, args.queue, args.stall_seconds, args.backlog)
    for row in rows:
        print(f"{row['figure']}: official {row['official']}  ours {row['ours']}  (bound {row['bound']})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
