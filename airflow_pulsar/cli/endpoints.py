"""Where the client commands connect: service URL, admin URL and token, from options or environment.

Defaults point at the embedded broker (``airflow-pulsar standalone`` on its default ports), so the
quick checks work with no options; ``PULSAR_SERVICE_URL``, ``PULSAR_ADMIN_URL``,
``PULSAR_TOKEN`` (or ``PULSAR_TOKEN_FILE``) and ``PULSAR_TLS_TRUST_CERTS`` point them at a real
cluster without typing a secret on the command line.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from urllib.parse import urlsplit

from airflow_pulsar.client import AuthenticationToken, Client
from airflow_pulsar.client.admin import PulsarAdmin

DEFAULT_SERVICE_URL = "pulsar://127.0.0.1:6650"
DEFAULT_ADMIN_URL = "http://127.0.0.1:8080"
# The URL schemes each option takes: the client looks topics up over HTTP as the official one does,
# so a service URL may be the admin one.
_SCHEMES = {"--service-url": ("pulsar", "pulsar+ssl", "http", "https"), "--admin-url": ("http", "https")}


def add_endpoint_arguments(parser: argparse.ArgumentParser, *, service: bool = True) -> None:
    """Add ``--service-url`` (when the command speaks the binary protocol), ``--admin-url`` and the token options."""
    if service:
        parser.add_argument(
            "--service-url",
            default=os.environ.get("PULSAR_SERVICE_URL", DEFAULT_SERVICE_URL),
            help="broker service URL, pulsar:// or pulsar+ssl://, or http(s):// to look topics up over REST (env PULSAR_SERVICE_URL)",
        )
    parser.add_argument(
        "--admin-url",
        default=os.environ.get("PULSAR_ADMIN_URL", DEFAULT_ADMIN_URL),
        help="admin REST URL, http:// or https:// (env PULSAR_ADMIN_URL)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=os.environ.get("PULSAR_TOKEN_FILE"),
        help="file holding an authentication token (env PULSAR_TOKEN_FILE; or set PULSAR_TOKEN)",
    )
    parser.add_argument(
        "--tls-trust-certs-file",
        default=os.environ.get("PULSAR_TLS_TRUST_CERTS"),
        help="PEM file of CAs trusted for pulsar+ssl:// and https:// (env PULSAR_TLS_TRUST_CERTS; default: system CAs)",
    )


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file is None:
        return os.environ.get("PULSAR_TOKEN") or None
    try:
        token = Path(args.token_file).read_text().strip()
    except OSError as exc:
        raise ValueError(f"--token-file {args.token_file}: cannot read it: {exc.strerror or exc}") from None
    if not token:
        raise ValueError(f"--token-file {args.token_file} is empty")
    return token


def _checked_url(option: str, url: str) -> str:
    """``url`` if its scheme suits ``option``. The two URLs are easily swapped, so a URL that suits
    the other option says so."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in _SCHEMES[option]:
        return url
    *others, last = (f"{name}://" for name in _SCHEMES[option])
    wanted = f"{', '.join(others)} or {last}"
    other = next((name for name, schemes in _SCHEMES.items() if scheme in schemes), None)
    swapped = f" ({scheme}:// is for {other})" if other else ""
    raise ValueError(f"{option} {url!r} must start with {wanted}{swapped}")


def open_client(args: argparse.Namespace, operation_timeout_seconds: float = 10) -> Client:
    """A client for ``--service-url``, with the token when one is given."""
    token = _token(args)
    authentication = AuthenticationToken(token) if token else None
    return Client(
        _checked_url("--service-url", args.service_url),
        authentication=authentication,
        operation_timeout_seconds=operation_timeout_seconds,
        tls_trust_certs_file_path=args.tls_trust_certs_file,
    )


def open_admin(args: argparse.Namespace) -> PulsarAdmin:
    """An admin REST client for ``--admin-url``, with the token when one is given."""
    token = _token(args)
    return PulsarAdmin(
        _checked_url("--admin-url", args.admin_url),
        authentication=AuthenticationToken(token) if token else None,
        tls_trust_certs_file_path=args.tls_trust_certs_file,
    )
