"""``airflow-pulsar topics create|update-partitions|list|stats|delete``: topic administration over the
admin REST API."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from airflow_pulsar.cli.command_line import CommandParser, non_negative_int, positive_int
from airflow_pulsar.client.admin import MessageBacklog, PulsarAdmin

from .endpoints import add_endpoint_arguments, open_admin


def _parser() -> CommandParser:
    parser = CommandParser(prog="airflow-pulsar topics", description="Create, list, inspect and delete topics.")
    commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = commands.add_parser("create", help="create a topic (partitioned with --partitions N)")
    create.add_argument("topic")
    create.add_argument(
        "--partitions", type=non_negative_int, default=0, help="number of partitions; 0 for a non-partitioned topic"
    )

    update = commands.add_parser(
        "update-partitions", help="raise a partitioned topic's partition count (open clients take the new partitions)"
    )
    update.add_argument("topic")
    update.add_argument("--partitions", type=positive_int, required=True, help="the new number of partitions")

    listing = commands.add_parser("list", help="list the topics of a namespace")
    listing.add_argument("--namespace", default="public/default", help="tenant/namespace")

    stats = commands.add_parser(
        "stats",
        help="message counts, storage and subscription backlogs of a topic (backlogs in messages, each "
        "message of a batch counted, and in entries)",
    )
    stats.add_argument("topic")
    stats.add_argument("--json", action="store_true", help="print Pulsar's stats document as JSON")

    delete = commands.add_parser("delete", help="delete a topic (all partitions of a partitioned one) and its data")
    delete.add_argument("topic")
    delete.add_argument("--force", action="store_true", help="delete even with producers or consumers attached")

    for sub in (create, update, listing, stats, delete):
        add_endpoint_arguments(sub, service=False)
    return parser


def _create(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    if args.partitions:
        admin.create_partitioned_topic(args.topic, args.partitions)
        return f"created {args.topic} with {args.partitions} partitions"
    admin.create_topic(args.topic)
    return f"created {args.topic}"


def _update_partitions(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    admin.update_partitioned_topic(args.topic, args.partitions)
    return f"{args.topic} now has {args.partitions} partitions"


def _list(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    partitioned = set(admin.list_partitioned_topics(args.namespace))
    lines = [f"{name} (partitioned)" for name in sorted(partitioned)]
    # Partitions of partitioned topics are listed under their topic, not one by one.
    lines += sorted(t for t in admin.list_topics(args.namespace) if t.split("-partition-")[0] not in partitioned)
    return "\n".join(lines) if lines else f"no topics in {args.namespace}"


def _stats_document(admin: PulsarAdmin, topic: str) -> dict[str, Any]:
    if admin.partition_count(topic):
        return admin.partitioned_stats(topic, per_partition=True)
    return admin.topic_stats(topic)


def _format_stats(topic: str, stats: dict[str, Any], backlogs: dict[str, MessageBacklog]) -> str:
    lines = [
        f"topic {topic}",
        f"  messages in: {stats.get('msgInCounter', 0)}  out: {stats.get('msgOutCounter', 0)}",
        f"  storage: {stats.get('storageSize', 0)} bytes  backlog: {stats.get('backlogSize', 0)} bytes",
    ]
    partitions = stats.get("partitions") or {}
    if partitions:
        lines.append(f"  partitions: {len(partitions)}")
        for name, part in sorted(partitions.items()):
            lines.append(f"    {name}: {part.get('msgInCounter', 0)} messages in")
    subscriptions = stats.get("subscriptions") or {}
    lines.append(f"  subscriptions: {len(subscriptions)}")
    for name, sub in sorted(subscriptions.items()):
        backlog = backlogs[name]
        counted = "" if backlog.exact else " (estimated)"
        lines.append(
            f"    {name} ({sub.get('type', '?')}): backlog {backlog.messages} messages{counted} in {backlog.entries} "
            f"entries, {sub.get('unackedMessages', 0)} unacked, {len(sub.get('consumers') or [])} consumers"
        )
    return "\n".join(lines)


def _stats(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    document = _stats_document(admin, args.topic)
    if args.json:
        return json.dumps(document, indent=2, sort_keys=True)
    # Pulsar's msgBacklog counts entries (a batch is one); users mean messages.
    backlogs = {name: admin.message_backlog(args.topic, name) for name in document.get("subscriptions") or {}}
    return _format_stats(args.topic, document, backlogs)


def _delete(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    if admin.partition_count(args.topic):
        admin.delete_partitioned_topic(args.topic, force=args.force)
    else:
        admin.delete_topic(args.topic, force=args.force)
    return f"deleted {args.topic}"


ACTIONS = {"create": _create, "update-partitions": _update_partitions, "list": _list, "stats": _stats, "delete": _delete}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one topics action; a failed admin call raises AdminError with Pulsar's reason."""
    args = _parser().parse_args(argv)
    with open_admin(args) as admin:
        print(ACTIONS[args.action](admin, args))
    return 0
