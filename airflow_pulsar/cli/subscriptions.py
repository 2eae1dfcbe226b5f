"""``airflow-pulsar subscriptions create|list|reset|delete``: subscription administration over the
admin REST API, with the positions the subscription operators take."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from airflow_pulsar import arguments, subscriptions
from airflow_pulsar.arguments import SubscriptionPosition
from airflow_pulsar.cli.command_line import CommandParser
from airflow_pulsar.client.admin import PulsarAdmin

from .endpoints import add_endpoint_arguments, open_admin

_POSITION_HELP = (
    "earliest, latest, a message id ledger:entry[:partition[:batch]], or a publish time "
    "(ISO 8601, e.g. 2024-05-01T12:00:00Z, or ms since the epoch)"
)


def _position(text: str) -> SubscriptionPosition:
    """A position option, refused by the parser (one line, exit 1) when malformed."""
    try:
        position = arguments.subscription_position(text, "position")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if isinstance(position, str):  # a Jinja template means nothing here
        raise argparse.ArgumentTypeError(f"not a position: {text!r}")
    return position


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="airflow-pulsar subscriptions", description="Create, list, reset (seek) and delete subscriptions."
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = commands.add_parser("create", help="create a subscription without a consumer (an existing one is left as it is)")
    create.add_argument("topic")
    create.add_argument("subscription")
    create.add_argument(
        "--position", type=_position, default="earliest", help=f"where it starts: {_POSITION_HELP} (default earliest)"
    )

    listing = commands.add_parser("list", help="list the subscriptions of a topic")
    listing.add_argument("topic")

    reset = commands.add_parser("reset", help="move a subscription (its consumers are disconnected and resubscribe)")
    reset.add_argument("topic")
    reset.add_argument("subscription")
    reset.add_argument("--to", type=_position, required=True, help=f"where to: {_POSITION_HELP}")

    delete = commands.add_parser("delete", help="delete a subscription and its backlog")
    delete.add_argument("topic")
    delete.add_argument("subscription")
    delete.add_argument("--force", action="store_true", help="delete even with consumers attached")

    for sub in (create, listing, reset, delete):
        add_endpoint_arguments(sub, service=False)
    return parser


def _create(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    if subscriptions.create_subscription(admin, args.topic, args.subscription, args.position):
        return f"created subscription {args.subscription} on {args.topic} at {subscriptions.describe(args.position)}"
    return f"subscription {args.subscription} already exists on {args.topic}: left as it is"


def _list(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    names = sorted(admin.list_subscriptions(args.topic))
    return "\n".join(names) if names else f"no subscriptions on {args.topic}"


def _reset(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    subscriptions.reset_subscription(admin, args.topic, args.subscription, args.to)
    return f"reset subscription {args.subscription} on {args.topic} to {subscriptions.describe(args.to)}"


def _delete(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    subscriptions.delete_subscription(admin, args.topic, args.subscription, force=args.force, missing_ok=False)
    return f"deleted subscription {args.subscription} on {args.topic}"


ACTIONS = {"create": _create, "list": _list, "reset": _reset, "delete": _delete}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subscriptions action; a failed admin call raises AdminError with Pulsar's reason, and
    a malformed topic name or an id without its partition ValueError (the CLI prints either in one line)."""
    args = _parser().parse_args(argv)
    with open_admin(args) as admin:
        print(ACTIONS[args.action](admin, args))
    return 0
