"""``airflow-pulsar permissions list|grant|revoke``: who may do what on a namespace, a topic or a
subscription, over the admin REST API (Pulsar's grants; a broker enforces them with authorization on).

    airflow-pulsar permissions grant --namespace acme/orders --role loader --actions produce
    airflow-pulsar permissions grant --topic persistent://acme/orders/raw --role auditor --actions consume
    airflow-pulsar permissions grant --namespace acme/orders --subscription ingest --roles loader,ops
    airflow-pulsar permissions list --topic persistent://acme/orders/raw
    airflow-pulsar permissions revoke --namespace acme/orders --role loader
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from airflow_pulsar.cli.command_line import CommandParser
from airflow_pulsar.client.admin import AuthAction, PulsarAdmin

from .endpoints import add_endpoint_arguments, open_admin

_ACTIONS = ", ".join(action.value for action in AuthAction)


def _names(text: str) -> list[str]:
    """A comma-separated list option (blanks around names ignored), refused when it names nothing."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def _actions(text: str) -> list[str]:
    names = _names(text)
    unknown = [name for name in names if name not in AuthAction.__members__]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown action {unknown[0]!r}: the actions are {_ACTIONS}")
    return names


def _add_target(parser: argparse.ArgumentParser, subscription_help: str | None = None) -> None:
    """``--namespace`` or ``--topic`` (one of them), and ``--subscription`` (with ``--namespace``)
    when ``subscription_help`` says what it means."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--namespace", metavar="TENANT/NAMESPACE", help="the namespace: every topic in it")
    target.add_argument("--topic", help="one topic (short names are in public/default)")
    if subscription_help is not None:
        parser.add_argument("--subscription", help=subscription_help)
    add_endpoint_arguments(parser, service=False)


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="airflow-pulsar permissions",
        description="List, grant and revoke permissions on namespaces, topics and subscriptions (a tenant admin's or "
        "a superuser's task; enforced by brokers with authorization on).",
    )
    commands = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = commands.add_parser("list", help="each role's actions (with --subscriptions: each subscription's roles)")
    _add_target(listing)
    listing.add_argument("--subscriptions", action="store_true", help="with --namespace: the roles of each subscription")
    grant = commands.add_parser("grant", help="let a role take actions, or let only some roles consume a subscription")
    _add_target(grant, "with --namespace and --roles: the subscription only those roles may consume")
    grant.add_argument("--role", help="the role to grant --actions to")
    grant.add_argument("--actions", type=_actions, help=f"comma-separated actions: {_ACTIONS}")
    grant.add_argument("--roles", type=_names, help="with --subscription: the comma-separated roles allowed on it")
    revoke = commands.add_parser("revoke", help="take away a role's grant, or take a role off a subscription's list")
    _add_target(revoke, "with --namespace: take --role off this subscription's list")
    revoke.add_argument("--role", required=True, help="the role to take the grant from")
    return parser


def _require(args: argparse.Namespace, **needed: object) -> None:
    """Refuse, naming the missing option, a combination the action cannot do."""
    for option, value in needed.items():
        if not value:
            raise ValueError(f"permissions {args.action}: give --{option.replace('_', '-')}")


def _subscription_target(args: argparse.Namespace) -> bool:
    if args.subscription is None:
        return False
    if args.namespace is None:
        raise ValueError(f"permissions {args.action}: --subscription goes with --namespace (subscription lists are per namespace)")
    return True


_ORDER = [action.value for action in AuthAction]


def _format(grants: dict[str, list[str]], empty: str) -> str:
    """One line per name, its values in a stable order (brokers list them in any): actions in
    Pulsar's order, roles alphabetically."""

    def ordered(values: list[str]) -> list[str]:
        return sorted(values, key=lambda value: (_ORDER.index(value) if value in _ORDER else len(_ORDER), value))

    return "\n".join(f"{name}: {', '.join(ordered(values)) or '-'}" for name, values in sorted(grants.items())) or empty


def _list(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    if args.subscriptions:
        if args.namespace is None:
            raise ValueError("permissions list: --subscriptions goes with --namespace")
        return _format(admin.subscription_permissions(args.namespace), f"no subscription of {args.namespace} has roles granted")
    if args.namespace is not None:
        return _format(admin.namespace_permissions(args.namespace), f"no role has permissions on {args.namespace}")
    return _format(admin.topic_permissions(args.topic), f"no role has permissions on {args.topic}")


def _grant(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    if _subscription_target(args):
        _require(args, roles=args.roles)
        admin.grant_subscription_permission(args.namespace, args.subscription, args.roles)
        return f"only {', '.join(args.roles)} may consume subscription {args.subscription} in {args.namespace}"
    if args.roles:
        raise ValueError("permissions grant: --roles goes with --subscription; a role's grant takes --role and --actions")
    _require(args, role=args.role, actions=args.actions)
    if args.namespace is not None:
        admin.grant_namespace_permission(args.namespace, args.role, args.actions)
    else:
        admin.grant_topic_permission(args.topic, args.role, args.actions)
    return f"granted {', '.join(args.actions)} on {args.namespace or args.topic} to {args.role}"


def _revoke(admin: PulsarAdmin, args: argparse.Namespace) -> str:
    if _subscription_target(args):
        admin.revoke_subscription_permission(args.namespace, args.subscription, args.role)
        return f"took {args.role} off subscription {args.subscription} in {args.namespace}"
    if args.namespace is not None:
        admin.revoke_namespace_permission(args.namespace, args.role)
    else:
        admin.revoke_topic_permission(args.topic, args.role)
    return f"revoked the permissions of {args.role} on {args.namespace or args.topic}"


ACTIONS = {"list": _list, "grant": _grant, "revoke": _revoke}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one permissions action; a refused or failed admin call raises AdminError with Pulsar's
    reason, a missing option ValueError (the CLI prints either in one line)."""
    args = _parser().parse_args(argv)
    with open_admin(args) as admin:
        print(ACTIONS[args.action](admin, args))
    return 0
