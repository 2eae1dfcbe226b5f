"""``airflow-pulsar tokens create|create-secret-key|validate``: Pulsar authentication tokens.

The tokens are what ``pulsar tokens create --secret-key`` makes (HS256 JWTs with ``sub`` and
optional ``exp``), so they work with ``airflow-pulsar standalone --token-secret-file`` and with a
Pulsar broker whose ``tokenSecretKey`` is the same key.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from airflow_pulsar.client.standalone.command_line import CommandParser
from airflow_pulsar.client.standalone.token_keys import create_secret_key, read_secret_key
from airflow_pulsar.client.standalone.tokens import TokenError, create_token, verify_token

# Units of Pulsar's relative times (``--expiry-time 1y``).
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_DURATION = re.compile(r"^(\d+)([smhdwy])$")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as ``30s``, ``15m``, ``1h``, ``7d``, ``2w`` or ``1y``."""
    match = _DURATION.match(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: give a positive number with a unit s, m, h, d, w or y (e.g. 1h)"
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _parser() -> CommandParser:
    parser = CommandParser(
        prog="airflow-pulsar tokens", description="Make and check Pulsar authentication tokens (HS256 JWTs)."
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="print a token for a subject, signed with the secret key")
    create.add_argument("--subject", required=True, help="the role the token stands for (the 'sub' claim)")
    create.add_argument("--expiry", type=parse_duration, help="lifetime, e.g. 1h or 30d (default: never expires)")

    secret = actions.add_parser("create-secret-key", help="make a new random secret key")
    secret.add_argument("--output", type=Path, help="write the raw key to this new file (default: print it in base64)")

    validate = actions.add_parser("validate", help="check a token against the secret key and print its claims")
    validate.add_argument("token", help="the token, or - to read it from standard input")

    for sub in (create, validate):
        sub.add_argument(
            "--secret-file",
            "--secret-key",
            dest="secret_file",
            required=True,
            help="the secret key: a file of raw bytes or data:;base64,..., or a file: or data: URL",
        )
    return parser


def _create(args: argparse.Namespace) -> str:
    expires_at = time.time() + args.expiry if args.expiry else None
    return create_token(read_secret_key(args.secret_file), args.subject, expires_at)


def _create_secret_key(args: argparse.Namespace) -> str:
    key = create_secret_key()
    if args.output is None:
        return base64.b64encode(key).decode()
    try:
        # A new file only: overwriting a key would silently invalidate every token made with it.
        descriptor = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise TokenError(f"{args.output} exists already; remove it first to replace the key") from None
    with os.fdopen(descriptor, "wb") as file:
        file.write(key)
    return f"wrote a {len(key) * 8}-bit secret key to {args.output}"


def _validate(args: argparse.Namespace) -> str:
    token = sys.stdin.read().strip() if args.token == "-" else args.token
    claims = verify_token(token, read_secret_key(args.secret_file))
    expiry = (
        datetime.fromtimestamp(claims.expires_at, timezone.utc).isoformat(timespec="seconds")
        if claims.expires_at is not None
        else "never"
    )
    return f"valid token: subject {claims.subject}, expires {expiry}"


ACTIONS = {"create": _create, "create-secret-key": _create_secret_key, "validate": _validate}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one tokens action; a bad key or token raises TokenError (or OSError) naming the reason."""
    args = _parser().parse_args(argv)
    print(ACTIONS[args.action](args))
    return 0
