"""``airflow-pulsar tokens``: Pulsar authentication tokens, as ``pulsar tokens`` makes and checks them.

``create-secret-key`` writes a raw 256-bit key (Pulsar's ``tokenSecretKey``); ``create-key-pair``
writes a private key (PKCS#8 DER) and a public key (X.509 DER, Pulsar's ``tokenPublicKey``) for
RS256 or ES256 and the other RSA and EC algorithms; ``create`` signs a token (``sub`` and optional
``exp``) with either key; ``validate`` checks one. The tokens work with ``airflow-pulsar standalone
--token-secret-file`` or ``--token-public-key`` and with a Pulsar broker given the same key.
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

from airflow_pulsar.broker.token_keys import (
    create_key_pair,
    create_secret_key,
    read_private_key,
    read_public_key,
    read_secret_key,
)
from airflow_pulsar.broker.tokens import ALGORITHM_FAMILIES, TokenError, create_token, verify_token
from airflow_pulsar.cli.command_line import CommandParser

# Units of Pulsar's relative times (``--expiry-time 1y``).
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_DURATION = re.compile(r"^(\d+)([smhdwy])$")
_KEY_PAIR_ALGORITHMS = [name for name, family in ALGORITHM_FAMILIES.items() if family != "HMAC"]
_KEY_HELP = "a file, or a file: or data:;base64, URL"


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
        prog="airflow-pulsar tokens",
        description="Make and check Pulsar authentication tokens (JWTs signed with a secret key or a key pair).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="print a token for a subject, signed with a secret or private key")
    create.add_argument("-s", "--subject", required=True, help="the role the token stands for (the 'sub' claim)")
    create.add_argument(
        "-e", "--expiry", "--expiry-time", dest="expiry", type=parse_duration,
        help="lifetime, e.g. 1h or 30d (default: never expires)",
    )  # fmt: skip
    signing = create.add_mutually_exclusive_group(required=True)
    signing.add_argument("-sk", "--secret-key", "--secret-file", dest="secret_key", help=f"the secret key: {_KEY_HELP}")
    signing.add_argument("-pk", "--private-key", help=f"the private key of a key pair (DER or PEM): {_KEY_HELP}")
    create.add_argument(
        "-a", "--signature-algorithm", choices=list(ALGORITHM_FAMILIES),
        help="the algorithm (default: HS256 for a secret key, RS256 for an RSA key, ES256 for an EC key)",
    )  # fmt: skip

    secret = actions.add_parser("create-secret-key", help="make a new random secret key")
    secret.add_argument("-o", "--output", type=Path, help="write the key to this new file (default: print it in base64)")
    secret.add_argument("-b", "--base64", action="store_true", help="write the file in base64 rather than raw bytes")

    pair = actions.add_parser("create-key-pair", help="make a new key pair: a private key signs, the public key checks")
    pair.add_argument("-a", "--signature-algorithm", choices=_KEY_PAIR_ALGORITHMS, default="RS256", help="the algorithm the keys are for")
    pair.add_argument("--output-private-key", type=Path, required=True, help="the new file for the private key (PKCS#8 DER)")
    pair.add_argument("--output-public-key", type=Path, required=True, help="the new file for the public key (X.509 DER)")

    validate = actions.add_parser("validate", help="check a token against a key and print its subject and expiry")
    validate.add_argument("token", help="the token, or - to read it from standard input")
    checking = validate.add_mutually_exclusive_group(required=True)
    checking.add_argument("-sk", "--secret-key", "--secret-file", dest="secret_key", help=f"the secret key: {_KEY_HELP}")
    checking.add_argument("-pk", "--public-key", help=f"the public key of a key pair (DER or PEM): {_KEY_HELP}")
    validate.add_argument(
        "-a", "--signature-algorithm", choices=_KEY_PAIR_ALGORITHMS, default="RS256",
        help="the algorithm of the public key's family (RSA or EC), as Pulsar's tokenPublicAlg",
    )  # fmt: skip
    return parser


def _create(args: argparse.Namespace) -> str:
    expires_at = time.time() + args.expiry if args.expiry else None
    key = read_secret_key(args.secret_key) if args.secret_key else read_private_key(args.private_key)
    return create_token(key, args.subject, expires_at, args.signature_algorithm)


def _create_secret_key(args: argparse.Namespace) -> str:
    key = create_secret_key()
    if args.output is None:
        return base64.b64encode(key).decode()
    _write_new_file(args.output, base64.b64encode(key) if args.base64 else key, 0o600)
    return f"wrote a {len(key) * 8}-bit secret key to {args.output}"


def _create_key_pair(args: argparse.Namespace) -> str:
    private, public = create_key_pair(args.signature_algorithm)
    _write_new_file(args.output_private_key, private, 0o600)
    _write_new_file(args.output_public_key, public, 0o644)
    return f"wrote a {args.signature_algorithm} private key to {args.output_private_key} and its public key to {args.output_public_key}"


def _write_new_file(path: Path, content: bytes, mode: int) -> None:
    """Write ``content`` to a file that must not exist yet: overwriting a key would silently
    invalidate every token made with it."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise TokenError(f"{path} exists already; remove it first to replace the key") from None
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)


def _validate(args: argparse.Namespace) -> str:
    token = sys.stdin.read().strip() if args.token == "-" else args.token
    key = read_secret_key(args.secret_key) if args.secret_key else read_public_key(args.public_key, args.signature_algorithm)
    claims = verify_token(token, key)
    expiry = (
        datetime.fromtimestamp(claims.expires_at, timezone.utc).isoformat(timespec="seconds")
        if claims.expires_at is not None
        else "never"
    )
    return f"valid token: subject {claims.subject}, expires {expiry}"


ACTIONS = {"create": _create, "create-secret-key": _create_secret_key, "create-key-pair": _create_key_pair, "validate": _validate}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one tokens action; a bad key or token raises TokenError (or OSError) naming the reason."""
    args = _parser().parse_args(argv)
    print(ACTIONS[args.action](args))
    return 0
