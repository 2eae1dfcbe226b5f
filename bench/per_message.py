"""The per-message path: each client's CPU per message beside its rate, and the broker's.

Three cases, 100 B messages:

- ``produce``: ``send_async(payload, None)`` ``--messages`` times with batching off, then ``flush()``;
- ``consume``: ``receive()`` plus ``acknowledge()`` of a backlog of ``--messages`` unbatched
  messages (the official producer writes it), receiver queue 1000;
- ``batched``: the same of a backlog written in batches of 100 messages.

Each client runs in a fresh process per round, the variants in turn (the first moving on by one
each round, see ``rounds.py``):

- ``official``: the official client (its C++ core);
- ``ours``: the client of this checkout;
- ``bare`` (``bare_client.py``): the least a Python client can do per message, so its rate is
  about the broker's ceiling;
- ``built``, for consume: the bare client making each message into the Message a ``receive()``
  returns, and no more, the least a client that hands messages over can spend;
- ``checkout``, with ``--checkout DIR``: our client from another checkout of the project (an
  older commit, say), run by the same interpreter.

A round reports the rate, the CPU the client's process spent per message while it ran
(``time.process_time``: user plus system time of all its threads, the reader and timer threads and
the C++ client's included; the broker is another process, so its share of the cores does not
count), the CPU of the thread that sends or receives, and the broker process's CPU per message. Rates are the best round; CPU
figures the median, which a busy machine moves less than rates. The ``ceiling`` column is a rate
as a share of the bare client's. Usage::

    python bench/per_message.py [--broker embedded|pulsar] [--messages N] [--rounds R] [--checkout DIR]

``suite_rows`` gives ``make bench``'s ``cpu`` section: the client CPU per message of ours beside
the official client's, with the bare (produce) or built (consume) client's as the floor.

Writes bench/results/per_message.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import brokers
import pulsar
from rounds import in_turn

RESULTS = Path(__file__).parent / "results" / "per_message.json"
BENCH = Path(__file__).resolve().parent
CHECKOUT = BENCH.parent
# The backlog each consume case drains, and its batch size (1: batching off).
BACKLOGS = {"consume": ("bench-per-message-backlog", 1), "batched": ("bench-per-message-batched", 100)}
CASES = ("produce", *BACKLOGS)
FLOORS = {"produce": "bare", "consume": "built", "batched": "built"}  # the least a client can spend per message
BARE_CLIENTS = ("bare", "built")  # run from bench/bare_client.py

# One round of one client, in a fresh interpreter: prints its figures as JSON.
_ROUND = r"""
import json, sys, time
import pulsar
from airflow_pulsar.client import Client
case, who, url, topic, subscription = sys.argv[1:6]
messages = int(sys.argv[6])
payload = (b"0123456789abcdef" * 7)[:100]
if who in ("bare", "built"):
    sys.path.append(sys.argv[7])
    import bare_client as source
    if case == "produce":
        worker = source.BareProducer(url, topic)
        run = lambda: worker.produce(messages, payload)
    else:
        worker = source.BareConsumer(url, topic, subscription)
        run = lambda: worker.consume(messages, build=who == "built", batched=case == "batched")
    closes = [worker.close]
else:
    import airflow_pulsar.client as source
    if who == "official":
        client = pulsar.Client(url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    else:
        client = Client(url, operation_timeout_seconds=30)
    if case == "produce":
        worker = client.create_producer(topic, batching_enabled=False, max_pending_messages=5000, block_if_queue_full=True,
                                        send_timeout_millis=60_000)
        def run():
            for _ in range(messages):
                worker.send_async(payload, None)
            worker.flush()
    else:
        worker = client.subscribe(topic, subscription, receiver_queue_size=1000, initial_position=pulsar.InitialPosition.Earliest)
        def run():
            for _ in range(messages):
                worker.acknowledge(worker.receive())
    closes = [worker.close, client.close]
# process_time: user plus system time of every thread of the process, in ns (os.times counts clock ticks).
start, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
run()
wall, thread, process = time.perf_counter() - wall, time.thread_time() - thread, time.process_time() - start
for close in closes:
    close()
print(json.dumps({"rate": messages / wall, "process_us": process / messages * 1e6, "thread_us": thread / messages * 1e6,
                  "client": source.__file__}))
"""


def package_tree(checkout: Path, into: Path) -> Path:
    """A directory to put on PYTHONPATH that imports ``airflow_pulsar`` (its client included) from
    ``checkout``: links to the checkout's ``airflow_pulsar`` entries plus ``client`` where the
    installed package maps it."""
    package = into / "airflow_pulsar"
    package.mkdir(parents=True)
    for entry in (checkout / "airflow_pulsar").iterdir():
        (package / entry.name).symlink_to(entry)
    (package / "client").symlink_to(checkout / "client")
    return into


def broker_cpu(pid: int) -> float:
    """CPU seconds the process has used (user plus system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_round(case: str, who: str, broker: Any, messages: int, index: int, path: Path | None, cwd: Path) -> dict[str, Any]:
    """Round ``index`` of one client (a topic of its own to produce to, a subscription of its own to
    the backlog), run in ``cwd`` (not a checkout, whose package would shadow ``path``); its figures
    and the broker's CPU per message meanwhile."""
    name = f"bench-per-message-{who}-{index}"
    topic = f"persistent://public/default/{BACKLOGS[case][0] if case in BACKLOGS else name}"
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    before = broker_cpu(broker.process.pid)
    command = [sys.executable, "-c", _ROUND, case, who, broker.service_url, topic, name, str(messages), str(BENCH)]
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{who} {case} round failed:\n{done.stderr}")
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    source = Path(figures.pop("client")).resolve()
    if who in BARE_CLIENTS:
        expected = BENCH
    else:
        expected = (CHECKOUT if path is None else path / "airflow_pulsar").joinpath("client").resolve()
    if who != "official" and not source.is_relative_to(expected):
        raise RuntimeError(f"{who} ran the client of {source}, not of {expected}")
    figures["broker_us"] = (broker_cpu(broker.process.pid) - before) / messages * 1e6
    if case in BACKLOGS:
        expect_acknowledged(broker, BACKLOGS[case][0], name)
    return figures


def expect_acknowledged(broker: Any, topic: str, subscription: str) -> None:
    """A consume round counts only if the broker took its acknowledgements: the subscription's
    backlog (the whole topic's messages, one round's worth) drains to 0 within a few seconds."""
    backlog = None
    for _ in range(50):
        backlog = broker.topic_stats(topic)["subscriptions"][subscription]["msgBacklog"]
        if backlog == 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{subscription} left {backlog} messages unacknowledged")


def measure(broker_kind: str, messages: int, rounds: int, checkout: Path | None) -> dict[str, Any]:
    """Every round of every variant and case, and a summary row per case and variant."""
    with tempfile.TemporaryDirectory(prefix="bench-per-message-") as scratch, brokers.running(broker_kind, fsync=False) as broker:
        variants: dict[str, Path | None] = {"official": None, "ours": None, "bare": None, "built": None}
        if checkout is not None:
            variants["checkout"] = package_tree(checkout.resolve(), Path(scratch) / "checkout")
        official = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        try:
            for topic, batch in BACKLOGS.values():
                write_backlog(official, f"persistent://public/default/{topic}", messages, batch)
        finally:
            official.close()
        # "built" differs from "bare" only in what it does per message received.
        clients = {case: [who for who in variants if case in BACKLOGS or who != "built"] for case in CASES}
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {case: {who: [] for who in clients[case]} for case in CASES}
        for index in range(rounds):
            for case in CASES:
                for who in in_turn(clients[case], index):
                    runs[case][who].append(run_round(case, who, broker, messages, index, variants[who], Path(scratch)))
    rows = []
    for case in CASES:
        for who, figures in runs[case].items():
            rows.append({
                "case": case,
                "client": who,
                "rate": round(max(f["rate"] for f in figures)),
                **{key: round(statistics.median(f[key] for f in figures), 2) for key in ("process_us", "thread_us", "broker_us")},
            })
    return {"broker": broker_kind, "messages": messages, "rounds": rounds, "rows": rows, "runs": runs}


def write_backlog(client: pulsar.Client, topic: str, messages: int, batch: int) -> None:
    """``messages`` of the round's payload written by the official producer, ``batch`` to an entry."""
    producer = client.create_producer(
        topic, batching_enabled=batch > 1, batching_max_messages=max(batch, 2), batching_max_publish_delay_ms=100,
        max_pending_messages=5000, block_if_queue_full=True,
    )
    payload = (b"0123456789abcdef" * 7)[:100]
    for _ in range(messages):
        producer.send_async(payload, None)
    producer.flush()
    producer.close()


LABELS = {"produce": "send_async + flush, unbatched", "consume": "receive + acknowledge, unbatched",
          "batched": "receive + acknowledge, batches of 100"}


def suite_rows(messages: int, rounds: int) -> list[dict[str, Any]]:
    """``make bench``'s rows: per case and broker, the client CPU per message (us, all its threads)
    of the official client and ours, the floor (bare or built client) beside them."""
    rows = []
    for broker_kind in brokers.KINDS:
        result = measure(broker_kind, messages, rounds, None)
        cpu = {(row["case"], row["client"]): row["process_us"] for row in result["rows"]}
        for case in CASES:
            rows.append({
                "figure": f"client CPU per message, us, {LABELS[case]} ({brokers.LABELS[broker_kind]})",
                "official": cpu[case, "official"],
                "ours": cpu[case, "ours"],
                "floor": cpu[case, FLOORS[case]],
                "cpu_bound": 0.75,
                "detail": [row for row in result["rows"] if row["case"] == case],
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=brokers.KINDS, default="embedded")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--checkout", type=Path, help="another checkout whose client to run beside this one's")
    args = parser.parse_args()
    result = measure(args.broker, args.messages, args.rounds, args.checkout)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    columns = ("client us/msg", "thread us/msg", "broker us/msg")
    print(f"{'case':8} {'client':9} {'msg/s':>8} {'ratio':>6} {'ceiling':>8}" + "".join(f"{column:>15}" for column in columns))
    rates = {(row["case"], row["client"]): row["rate"] for row in result["rows"]}
    for row in result["rows"]:
        ratio, ceiling = (row["rate"] / rates[row["case"], peer] for peer in ("official", "bare"))
        cpu = "".join(f"{row[key]:15.2f}" for key in ("process_us", "thread_us", "broker_us"))
        print(f"{row['case']:8} {row['client']:9} {row['rate']:8,} {ratio:6.2f} {ceiling:8.2f}{cpu}")


if __name__ == "__main__":
    main()
