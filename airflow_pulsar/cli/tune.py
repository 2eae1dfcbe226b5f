"""``airflow-pulsar tune``: producer settings for a message size, partition count and latency budget."""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import Enum
from typing import Any

from airflow_pulsar.cli.command_line import CommandParser
from airflow_pulsar.client import recommend_settings


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="airflow-pulsar tune",
        description="Recommend producer and client settings (the producer tuning template).",
    )
    parser.add_argument("--message-size", type=int, required=True, help="typical message size in bytes")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the topic (1 if not partitioned)")
    parser.add_argument("--latency-ms", type=float, default=10.0, help="how long a message may wait to be sent")
    parser.add_argument("--max-pending", type=int, default=1000, help="pending messages per partition")
    parser.add_argument("--json", action="store_true", help="print the settings as JSON")
    return parser


def _plain(value: Any) -> Any:
    return value.name if isinstance(value, Enum) else value


def main(argv: Sequence[str] | None = None) -> int:
    """Print the recommended settings as Python keyword arguments (or JSON) with the template's notes."""
    args = _parser().parse_args(argv)
    tuning = recommend_settings(args.message_size, args.partitions, args.latency_ms, args.max_pending)  # ValueError names a bad value
    if args.json:
        document = {
            "client": {k: _plain(v) for k, v in tuning.client_settings.items()},
            "producer": {k: _plain(v) for k, v in tuning.producer_settings.items()},
            "notes": tuning.notes,
        }
        print(json.dumps(document, indent=2))
        return 0
    print("Client(service_url,")
    for key, value in tuning.client_settings.items():
        print(f"       {key}={value!r},")
    print(")\nclient.create_producer(topic,")
    for key, value in tuning.producer_settings.items():
        shown = f"{type(value).__name__}.{value.name}" if isinstance(value, Enum) else repr(value)
        print(f"    {key}={shown},")
    print(")")
    for note in tuning.notes:
        print(f"# {note}")
    return 0
