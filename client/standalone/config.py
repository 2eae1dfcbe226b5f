"""Settings of the standalone broker and its command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ..protocol.frames import DEFAULT_MAX_MESSAGE_SIZE


class ConfigError(ValueError):
    """A setting the broker cannot start with; the message says which and why."""


@dataclass
class BrokerConfig:
    """Everything the standalone broker can be told at start."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 6650
    http_port: int = 8080
    fsync: bool = True
    dedup: bool = False
    # Expose each entry's broker entry index (PIP-90) on admin REST, as Pulsar does with
    # brokerEntryMetadataInterceptors=...AppendIndexMetadataInterceptor; off mirrors a Pulsar without it.
    entry_index: bool = True
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    keepalive_seconds: float = 30.0
    token_secret_file: str | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None

    @property
    def tls(self) -> bool:
        """Whether both ports serve TLS (``pulsar+ssl://`` and ``https://``)."""
        return self.tls_cert_file is not None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the broker's options to ``parser`` (shared by ``airflow-pulsar standalone`` and ``-m``)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=6650, help="binary protocol port; 0 picks a free one")
    parser.add_argument(
        "--http-port",
        type=int,
        default=8080,
        help="admin REST port (default 8080, as Apache Pulsar's, and also Airflow's api-server default: "
        "run one of them on another port); 0 picks a free one",
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="directory for the broker's database")
    parser.add_argument("--no-fsync", action="store_true", help="do not fsync commits (faster, not crash-safe)")
    parser.add_argument("--dedup", action="store_true", help="deduplicate sends by producer name and sequence id")
    parser.add_argument(
        "--no-entry-index",
        action="store_true",
        help="leave out the broker entry index (X-Pulsar-Broker-Entry-METADATA-index), as a Pulsar broker without "
        "AppendIndexMetadataInterceptor: backlogs in messages are then estimated",
    )
    parser.add_argument(
        "--max-message-size", type=_positive_int, default=DEFAULT_MAX_MESSAGE_SIZE, help="largest message in bytes"
    )
    parser.add_argument(
        "--token-secret-file",
        metavar="F",
        help="require token authentication on both ports, checking tokens with this secret key "
        "(raw bytes, or data:;base64,...; also a file: or data: URL, as Pulsar's tokenSecretKey)",
    )
    parser.add_argument("--tls-cert-file", type=Path, help="PEM certificate (chain): both ports then serve TLS only")
    parser.add_argument("--tls-key-file", type=Path, help="PEM private key of --tls-cert-file")


def from_arguments(args: argparse.Namespace) -> BrokerConfig:
    """Build a BrokerConfig from parsed arguments."""
    if args.tls_key_file and not args.tls_cert_file:
        raise ConfigError("--tls-key-file needs --tls-cert-file")
    return BrokerConfig(
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        http_port=args.http_port,
        fsync=not args.no_fsync,
        dedup=args.dedup,
        entry_index=not args.no_entry_index,
        max_message_size=args.max_message_size,
        token_secret_file=args.token_secret_file,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of bytes, got {text}")
    return value
