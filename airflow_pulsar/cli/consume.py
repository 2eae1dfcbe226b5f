"""``airflow-pulsar consume``: receive messages from a subscription, print them, acknowledge them."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from airflow_pulsar.cli.command_line import CommandParser, non_negative_int, positive_float
from airflow_pulsar.client import ConsumerType, InitialPosition, Message, Timeout

from .endpoints import add_endpoint_arguments, open_client
from .progress import Counter

SUBSCRIPTION_TYPES = {"Exclusive": ConsumerType.Exclusive, "Shared": ConsumerType.Shared,
                      "Failover": ConsumerType.Failover, "Key_Shared": ConsumerType.KeyShared}


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="airflow-pulsar consume",
        description="Receive messages and acknowledge them; stops after -n messages or --timeout idle seconds.",
    )
    parser.add_argument("topic")
    parser.add_argument("-s", "--subscription", required=True, help="subscription name")
    parser.add_argument(
        "-n", "--num-messages", type=non_negative_int, default=0, help="stop after this many messages; 0: until idle"
    )
    parser.add_argument("--timeout", type=positive_float, default=5.0, help="stop after this many seconds without a message")
    parser.add_argument("--type", default="Exclusive", choices=list(SUBSCRIPTION_TYPES), help="subscription type")
    parser.add_argument("--position", default="earliest", choices=["earliest", "latest"], help="where a new subscription starts")
    parser.add_argument("--no-ack", action="store_true", help="leave the messages unacknowledged")
    parser.add_argument("-q", "--quiet", action="store_true", help="count messages without printing them")
    add_endpoint_arguments(parser)
    return parser


def _describe(message: Message) -> str:
    body = message.data()
    try:
        text = body.decode()
    except UnicodeDecodeError:
        text = body.hex()
    key = f" key={message.partition_key()}" if message.partition_key() else ""
    props = f" properties={message.properties()}" if message.properties() else ""
    return f"{message.message_id()}{key}{props}: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Receive until the count is reached or the topic is idle for ``--timeout`` seconds."""
    args = _parser().parse_args(argv)
    client = open_client(args)
    try:
        consumer = client.subscribe(
            args.topic,
            args.subscription,
            consumer_type=SUBSCRIPTION_TYPES[args.type],
            initial_position=InitialPosition.Earliest if args.position == "earliest" else InitialPosition.Latest,
            # Acknowledge single messages of a batch: what the command reports as acknowledged
            # must stay acknowledged even when it stops in the middle of a batch.
            batch_index_ack_enabled=True,
        )
        with Counter(f"consuming {args.topic}", args.num_messages or None) as counter:
            while not args.num_messages or counter.count < args.num_messages:
                try:
                    message = consumer.receive(int(args.timeout * 1000))
                except Timeout:
                    break
                if not args.quiet:
                    print(_describe(message))
                if not args.no_ack:
                    consumer.acknowledge(message)
                counter.advance()
        consumer.close()  # flushes grouped acknowledgements
        verb = "received" if args.no_ack else "received and acknowledged"
        print(f"{verb} {counter.count} messages from {args.topic} ({counter.rate:,.0f} msg/s)", file=sys.stderr)
    finally:
        client.close()
    return 0
