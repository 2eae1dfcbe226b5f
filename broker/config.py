"""Settings of the standalone broker and its command line."""

from __future__ import annotations

import argparse
import base64
import binascii
from dataclasses import dataclass
from pathlib import Path

from airflow_pulsar.cli.command_line import non_negative_int, port_number, positive_float, positive_int
from airflow_pulsar.client.protocol.frames import DEFAULT_MAX_MESSAGE_SIZE

from .client_limits import ClientLimits, add_limit_arguments, limits_from_arguments


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
    # The most bytes the database may hold (None: as the disk allows); past it sends fail as on a full disk.
    max_storage_size: int | None = None
    # Tests only: the file switching injected storage faults on and off (broker/storage_faults.py).
    test_storage_fault_file: Path | None = None
    dedup: bool = False
    # Expose each entry's broker entry index (PIP-90) on admin REST, as Pulsar does with
    # brokerEntryMetadataInterceptors=...AppendIndexMetadataInterceptor; off mirrors a Pulsar without it.
    entry_index: bool = True
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    # Pulsar's keepAliveIntervalSeconds: a client must complete CONNECT within it, and one that
    # sends no frame for two of them is closed.
    keepalive_seconds: float = 30.0
    # Pulsar's brokerServiceCompactionMonitorIntervalInSeconds: how often topics are checked
    # against their namespace's compactionThreshold.
    compaction_monitor_seconds: float = 60.0
    # Transaction coordinators (partitions of pulsar/system/transaction_coordinator_assign); 0 turns
    # transactions off, as Pulsar's transactionCoordinatorEnabled=false (its standalone's default).
    transaction_coordinators: int = 0
    limits: ClientLimits = ClientLimits()
    # Authentication providers, each on when configured, as Pulsar's authenticationProviders list.
    token_secret_file: str | None = None
    token_public_key: str | None = None
    token_public_alg: str = "RS256"
    token_auth_claim: str = "sub"
    token_audience_claim: str | None = None
    token_audience: str | None = None
    basic_auth_conf: str | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_trust_certs_file: Path | None = None
    tls_require_trusted_client_cert: bool = False
    # Pulsar's authorizationEnabled and superUserRoles: each request is checked against the role
    # authentication gave it (superuser, tenant admin, or a grant).
    authorization: bool = False
    superuser_roles: frozenset[str] = frozenset()

    @property
    def tls(self) -> bool:
        """Whether both ports serve TLS (``pulsar+ssl://`` and ``https://``)."""
        return self.tls_cert_file is not None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the broker's options to ``parser`` (shared by ``airflow-pulsar standalone`` and ``-m``)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=port_number, default=6650, help="binary protocol port; 0 picks a free one")
    parser.add_argument(
        "--http-port",
        type=port_number,
        default=8080,
        help="admin REST port; 0 picks a free one. Apache Pulsar's is 8080 too, and so is Airflow's api-server's: "
        "run one of them on another port",
    )
    parser.add_argument("--data-dir", type=Path, required=True, help="directory for the broker's database")
    parser.add_argument("--no-fsync", action="store_true", help="do not fsync commits (faster, not crash-safe)")
    parser.add_argument(
        "--max-storage-size",
        type=positive_int,
        metavar="BYTES",
        help="cap the database at this many bytes: past it, sends fail with PersistenceError as on a full disk "
        "(producers retry), and succeed again once space is freed, e.g. by deleting a topic",
    )
    parser.add_argument("--test-storage-fault-file", type=Path, help=argparse.SUPPRESS)  # tests inject faults through it
    parser.add_argument("--dedup", action="store_true", help="deduplicate sends by producer name and sequence id")
    parser.add_argument(
        "--no-entry-index",
        action="store_true",
        help="leave out the broker entry index (X-Pulsar-Broker-Entry-METADATA-index), as a Pulsar broker without "
        "AppendIndexMetadataInterceptor: backlogs in messages are then estimated",
    )
    parser.add_argument(
        "--max-message-size", type=positive_int, default=DEFAULT_MAX_MESSAGE_SIZE, help="largest message in bytes"
    )
    parser.add_argument(
        "--keep-alive-interval-seconds",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="Pulsar's keepAliveIntervalSeconds: a client must complete CONNECT within this time; one sending no "
        "frame for twice this time is closed",
    )
    parser.add_argument(
        "--compaction-monitor-interval-seconds",
        type=positive_float,
        default=60.0,
        metavar="S",
        help="Pulsar's brokerServiceCompactionMonitorIntervalInSeconds: how often each topic is compacted if it grew "
        "past its namespace's compactionThreshold since it was last compacted",
    )
    parser.add_argument(
        "--transaction-coordinators",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="run N transaction coordinators, turning transactions (PIP-31) on; 0, the default as in Pulsar "
        "standalone, leaves them off",
    )
    add_limit_arguments(parser)
    parser.add_argument(
        "--token-secret-file",
        metavar="F",
        help="require token authentication on both ports, checking tokens with this secret key: a file of raw "
        "bytes or of data:;base64,... (also a file: URL, as Pulsar's tokenSecretKey), or env:NAME, the environment "
        "variable NAME holding it in base64; never the key itself, which every user could read in the arguments",
    )
    parser.add_argument(
        "--token-public-key",
        metavar="F",
        help="require token authentication, checking tokens (e.g. OAuth2 access tokens) with this public key "
        "(DER or PEM; also a file: or data: URL, as Pulsar's tokenPublicKey, or env:NAME)",
    )
    parser.add_argument(
        "--token-public-alg", default="RS256", help="algorithm family of --token-public-key: RS256, ES256, ..."
    )
    parser.add_argument("--token-auth-claim", default="sub", help="the token claim holding the role")
    parser.add_argument("--token-audience-claim", help="the token claim that must name --token-audience (e.g. aud)")
    parser.add_argument("--token-audience", help="the audience standing for this broker, with --token-audience-claim")
    parser.add_argument(
        "--basic-auth-conf",
        metavar="F",
        help="enable basic authentication with this users file of user:hash lines ($apr1$ MD5 or crypt DES, as "
        "htpasswd -m or -d writes them; also a file: URL, as Pulsar's basicAuthConf, or env:NAME, the environment "
        "variable NAME holding the lines)",
    )
    parser.add_argument("--tls-cert-file", type=Path, help="PEM certificate (chain): both ports then serve TLS only")
    parser.add_argument("--tls-key-file", type=Path, help="PEM private key of --tls-cert-file")
    parser.add_argument(
        "--tls-trust-certs-file",
        type=Path,
        help="PEM CA certificates for client certificates: enables TLS authentication (method tls, the role is "
        "the certificate's CN) on both ports",
    )
    parser.add_argument(
        "--tls-require-trusted-client-cert",
        action="store_true",
        help="refuse TLS handshakes without a client certificate from --tls-trust-certs-file",
    )
    parser.add_argument(
        "--authorization",
        action="store_true",
        help="check every request against the role its credentials authenticate: superusers and tenant admins "
        "may do anything in their scope, other roles what was granted them (Pulsar's authorizationEnabled); "
        "needs an authentication option",
    )
    parser.add_argument(
        "--superuser-roles",
        type=_role_list,
        default=frozenset(),
        metavar="ROLES",
        help="comma-separated roles allowed everything, with --authorization (Pulsar's superUserRoles)",
    )


def from_arguments(args: argparse.Namespace) -> BrokerConfig:
    """Build a BrokerConfig from parsed arguments."""
    _check_combinations(args)
    _check_secrets_kept_off_the_command_line(args)
    return BrokerConfig(
        data_dir=args.data_dir,
        host=args.host,
        port=args.port,
        http_port=args.http_port,
        fsync=not args.no_fsync,
        max_storage_size=args.max_storage_size,
        test_storage_fault_file=args.test_storage_fault_file,
        dedup=args.dedup,
        entry_index=not args.no_entry_index,
        max_message_size=args.max_message_size,
        keepalive_seconds=args.keep_alive_interval_seconds,
        compaction_monitor_seconds=args.compaction_monitor_interval_seconds,
        transaction_coordinators=args.transaction_coordinators,
        limits=limits_from_arguments(args),
        token_secret_file=args.token_secret_file,
        token_public_key=args.token_public_key,
        token_public_alg=args.token_public_alg,
        token_auth_claim=args.token_auth_claim,
        token_audience_claim=args.token_audience_claim,
        token_audience=args.token_audience,
        basic_auth_conf=args.basic_auth_conf,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        tls_trust_certs_file=args.tls_trust_certs_file,
        tls_require_trusted_client_cert=args.tls_require_trusted_client_cert,
        authorization=args.authorization,
        superuser_roles=args.superuser_roles,
    )


def _role_list(text: str) -> frozenset[str]:
    """Roles as Pulsar reads a list setting: comma-separated, blanks around each ignored."""
    return frozenset(role.strip() for role in text.split(",") if role.strip())


def _check_secrets_kept_off_the_command_line(args: argparse.Namespace) -> None:
    """A secret key or a users file given in place (a ``data:`` URL, base64) is refused: every user
    of the machine can read a process's arguments (``ps``, ``/proc/PID/cmdline``)."""
    given = [
        ("--token-secret-file", args.token_secret_file, "the secret key", "secret.key"),
        ("--basic-auth-conf", args.basic_auth_conf, "the users file", "users.htpasswd"),
    ]
    for option, value, what, example in given:
        if value and (value.startswith("data:") or (option == "--basic-auth-conf" and _is_inline_base64(value))):
            raise ConfigError(
                f"{option}: {what} is given on the command line, where every user of this machine can read it "
                f"(ps, /proc/PID/cmdline); give a file ({option} {example}) or an environment variable holding it "
                f"({option} env:NAME)"
            )


def _is_inline_base64(value: str) -> bool:
    """Whether a ``--basic-auth-conf`` value is content in base64 rather than a file, a URL or a variable."""
    if value.startswith(("file:", "env:")) or Path(value).exists():
        return False
    try:
        base64.b64decode(value, validate=True)
    except binascii.Error:
        return False
    return True


def _check_combinations(args: argparse.Namespace) -> None:
    """Options that mean nothing (or two things) together stop the start, naming them."""
    needs = [
        ("--tls-key-file", args.tls_key_file, "--tls-cert-file", args.tls_cert_file),
        ("--tls-trust-certs-file", args.tls_trust_certs_file, "--tls-cert-file", args.tls_cert_file),
        ("--tls-require-trusted-client-cert", args.tls_require_trusted_client_cert, "--tls-trust-certs-file",
         args.tls_trust_certs_file),
        ("--token-audience-claim", args.token_audience_claim, "--token-audience", args.token_audience),
        ("--token-audience", args.token_audience, "--token-audience-claim", args.token_audience_claim),
    ]  # fmt: skip
    for option, given, required, present in needs:
        if given and not present:
            raise ConfigError(f"{option} needs {required}")
    authenticating = args.token_secret_file or args.token_public_key or args.basic_auth_conf or args.tls_trust_certs_file
    if args.authorization and not authenticating:
        raise ConfigError(
            "--authorization needs authentication, which gives each client the role it is authorized as: add "
            "--token-secret-file, --token-public-key, --basic-auth-conf or --tls-trust-certs-file"
        )
    if args.superuser_roles and not args.authorization:
        raise ConfigError("--superuser-roles needs --authorization: without it every authenticated role may do anything")
    if args.pulsar_channel_write_buffer_low_water_mark > args.pulsar_channel_write_buffer_high_water_mark:
        raise ConfigError(
            "--pulsar-channel-write-buffer-low-water-mark must not exceed --pulsar-channel-write-buffer-high-water-mark"
        )
    if args.token_secret_file and args.token_public_key:
        raise ConfigError("give --token-secret-file or --token-public-key, not both: tokens are checked with one key")
