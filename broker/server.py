"""Starting and stopping the standalone broker: binary protocol server plus admin HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import signal
import ssl
import weakref
from collections.abc import Iterator, Sequence

from aiohttp import web

from airflow_pulsar.cli.command_line import CommandParser

from .admin_http import AdminApi
from .authentication_config import authentication_service, trust_client_certificates
from .config import BrokerConfig, ConfigError, add_arguments, from_arguments
from .connection import ServerConnection
from .connection_admission import ConnectionAdmission
from .loopback import exposure_warning
from .service import BrokerService

log = logging.getLogger(__name__)

PROG = "airflow-pulsar standalone"
READY_PREFIX = f"{PROG} ready:"
# Allocations between collections of the youngest generation (Python's default: 700). The broker
# keeps many objects alive (entry caches, sends awaiting their group commit), and at the default
# the collector kept walking them: unbatched publishing ran at ~24k msg/s, ~50k at this threshold.
_GC_YOUNG_THRESHOLD = 20_000
# Connections waiting to be accepted (asyncio's default: 100). A burst beyond it, such as a
# thousand clients starting at once, had their SYNs dropped and retried a second later.
_ACCEPT_BACKLOG = 1024


class StandaloneBroker:
    """A running broker: start it inside an event loop, stop it to flush and close."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        # Key and certificate load before anything binds, so a bad one stops the start with its reason.
        self.authentication = authentication_service(config)
        self.tls_context = _tls_context(config)
        self.service = BrokerService(config)
        self._server: asyncio.base_events.Server | None = None
        self._runner: web.AppRunner | None = None
        # Weak: a closed connection must not stay alive here (one leaked per client otherwise).
        self._connections: weakref.WeakSet[ServerConnection] = weakref.WeakSet()
        limits = config.limits
        self._admission = ConnectionAdmission(limits.broker_max_connections, limits.broker_max_connections_per_ip)

    async def start(self) -> None:
        """Load storage, bind both ports, and fill in the service and web URLs."""
        loop = asyncio.get_running_loop()
        self.service.start(loop)
        try:
            with _port_taken_is_config_error("--port", self.config.port, "binary protocol"):
                self._server = await loop.create_server(
                    self._new_connection, self.config.host, self.config.port, ssl=self.tls_context, backlog=_ACCEPT_BACKLOG
                )
            self._runner = web.AppRunner(AdminApi(self.service, self.authentication).app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, self.config.host, self.config.http_port, ssl_context=self.tls_context)
            with _port_taken_is_config_error("--http-port", self.config.http_port, "admin REST"):
                await site.start()
        except BaseException:
            await self.stop()
            raise
        port = self._server.sockets[0].getsockname()[1]
        http_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        tls = self.tls_context is not None
        self.service.service_url = f"{'pulsar+ssl' if tls else 'pulsar'}://{self.config.host}:{port}"
        self.service.web_service_url = f"{'https' if tls else 'http'}://{self.config.host}:{http_port}"
        warning = exposure_warning(self.config.host, port, http_port, authenticated=self.authentication is not None)
        if warning is not None:
            log.warning(warning)

    def _new_connection(self) -> ServerConnection:
        connection = ServerConnection(self.service, self.authentication, self._admission)
        self._connections.add(connection)
        return connection

    async def stop(self) -> None:
        """Stop accepting, close every connection, and commit what is queued."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.close()
        if self._runner is not None:
            await self._runner.cleanup()
        # Let queued writes resolve before the storage closes.
        await asyncio.sleep(0)
        self.service.close()


async def serve(config: BrokerConfig) -> None:
    """Run the broker until SIGTERM or SIGINT."""
    broker = StandaloneBroker(config)
    await broker.start()
    gc.freeze()  # what is loaded by now lives as long as the process: keep it out of every collection
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"{READY_PREFIX} service_url={broker.service.service_url} web_service_url={broker.service.web_service_url}",
        flush=True,
    )
    await stop.wait()
    log.info("stopping")
    await broker.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``airflow-pulsar standalone`` and ``python -m airflow_pulsar.broker``;
    a setting it cannot start with raises :class:`ConfigError` naming the option."""
    parser = CommandParser(prog=PROG, description="Run the embedded Pulsar standalone broker.")
    add_arguments(parser)
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="logging level"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    gc.set_threshold(_GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    asyncio.run(serve(from_arguments(args)))
    return 0


@contextlib.contextmanager
def _port_taken_is_config_error(option: str, port: int, serves: str) -> Iterator[None]:
    """Turn "address already in use" into one line naming the option to change."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        # Airflow's api-server listens on 8080 by default, as Pulsar's admin REST does.
        also = " (Airflow's api-server also listens on 8080 by default)" if port == 8080 else ""
        raise ConfigError(
            f"{option} {port} ({serves}) is already in use{also}; pass another port, or 0 for a free one"
        ) from None


def _tls_context(config: BrokerConfig) -> ssl.SSLContext | None:
    if config.tls_cert_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(config.tls_cert_file, config.tls_key_file)
    except OSError as exc:  # ssl.SSLError is one
        key = config.tls_key_file or "(in the same file)"
        raise ConfigError(f"cannot load the TLS certificate {config.tls_cert_file} with key {key}: {exc}") from None
    trust_client_certificates(context, config)
    return context

