"""``airflow-pulsar produce``: send messages given on the command line, from a file, or generated."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator, Sequence

from airflow_pulsar.cli.command_line import CommandParser, non_negative_int
from airflow_pulsar.client import CompressionType, MessageId, PulsarException, Result

from .endpoints import add_endpoint_arguments, open_client
from .progress import Counter


def _property(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE, got {pair!r}")
    return key, value


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="airflow-pulsar produce",
        description="Send messages: each -m value, each line of --file, or --count generated ones.",
    )
    parser.add_argument("topic")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-m", "--message", action="append", help="a message body (repeatable)")
    source.add_argument("--file", type=argparse.FileType("r"), help="send each line of this file ('-' for stdin)")
    source.add_argument("--count", type=non_negative_int, help="send this many generated messages of --size bytes")
    parser.add_argument("--size", type=non_negative_int, default=100, help="bytes per generated message")
    parser.add_argument("--key", help="partition key of every message")
    parser.add_argument(
        "-p", "--property", action="append", default=[], type=_property, metavar="K=V", help="message property (repeatable)"
    )
    parser.add_argument("--no-batching", action="store_true", help="send one message per entry")
    parser.add_argument(
        "--compression", default="NONE", choices=[c.name for c in CompressionType if c.name.isupper()], help="batch codec"
    )
    add_endpoint_arguments(parser)
    return parser


def _payloads(args: argparse.Namespace) -> tuple[Iterator[bytes], int | None]:
    if args.message is not None:
        return (m.encode() for m in args.message), len(args.message)
    if args.file is not None:
        return (line.rstrip("\n").encode() for line in args.file), None
    # Each body starts with its index, padded to --size, so a consumer can tell them apart.
    return (f"{i}:".encode().ljust(args.size, b"x") for i in range(args.count)), args.count


def main(argv: Sequence[str] | None = None) -> int:
    """Send every message asynchronously with batching, wait for every receipt, report the count."""
    args = _parser().parse_args(argv)
    properties = dict(args.property)
    payloads, total = _payloads(args)
    failures: list[Exception] = []
    last: list[MessageId | None] = []
    lock = threading.Lock()
    client = open_client(args)
    try:
        producer = client.create_producer(
            args.topic,
            batching_enabled=not args.no_batching,
            compression_type=CompressionType[args.compression],
            block_if_queue_full=True,
        )
        with Counter(f"producing to {args.topic}", total) as counter:

            def on_receipt(result: Result, message_id: MessageId | None) -> None:
                with lock:
                    if result != Result.Ok:
                        failures.append(PulsarException(f"send failed: {result}"))
                    else:
                        last[:] = [message_id]
                        counter.advance()

            for payload in payloads:
                producer.send_async(payload, on_receipt, partition_key=args.key, properties=properties or None)
            producer.flush()
        print(f"sent {counter.count} messages to {args.topic} ({counter.rate:,.0f} msg/s); last message id {last[0] if last else None}")
    finally:
        client.close()
    if failures:
        print(f"airflow-pulsar produce: {len(failures)} sends failed, first: {failures[0]}", file=sys.stderr)
        return 1
    return 0
