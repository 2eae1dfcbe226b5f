"""Apache Pulsar standalone as a child JVM, from the jars `make` resolves with ``jvm/pom.xml``.

Used by the tests (one per pytest-xdist worker), the benchmarks and ``make pulsar``. It exposes the
same surface as the embedded broker's ``BrokerProcess`` (``service_url``, ``web_url``, ``admin()``,
``topic_stats()``, ``stop()``, ``kill()``, ``restart()``), so a test written against one runs
unchanged against the other.

The generated configuration keeps Pulsar's defaults except where one machine needs otherwise:
loopback and free ports, one bookie (ensemble, write and ack quorum 1), small caches, no load
manager, and idle topics kept (Pulsar deletes an idle topic without subscriptions after about a
minute, which would race the tests). Brokers also append the index entry metadata (PIP-90), the
configuration under which the provider counts backlogs exactly in messages.

The JVM plumbing here (``JavaProcess``, the broker and bookie settings, readiness, ``AdminRest``)
is shared with ``jvm/pulsar_cluster.py``, which runs Pulsar as a cluster of separate JVMs.

``python jvm/apache_pulsar.py`` runs one in the foreground and prints its URLs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

from jvm.class_sharing import JVM_CACHE, sharing_options

PULSAR_VERSION = "4.2.4"
CLASSPATH_FILE = JVM_CACHE / "pulsar.classpath"
# The class-data-sharing archive of a standalone (``make pulsar-cds``, jvm/pulsar_cds.py), which
# every Pulsar JVM maps its classes from when it is there: a standalone starts in about two thirds
# of the time on a busy 2-core machine.
CLASS_ARCHIVE = JVM_CACHE / "pulsar.jsa"
STARTUP_TIMEOUT = 180.0

# What Pulsar's bin/pulsar passes to every JVM it starts.
JVM_OPTIONS = [
    "-Djute.maxbuffer=10485760",
    "-Djava.net.preferIPv4Stack=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.net=ALL-UNNAMED",
    "--add-opens",
    "java.management/sun.management=ALL-UNNAMED",
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dzookeeper.4lw.commands.whitelist=*",
    "-Dzookeeper.snapshot.trust.empty=true",
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dlog4j2.is.webapp=false",
]

# For the tests' JVMs: C1 only. On two busy cores a standalone starts in about half the time and
# half the CPU, and the tests send little; the benchmarks keep Pulsar's own JIT.
QUICK_JIT = ["-XX:TieredStopAtLevel=1"]

INDEX_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"

# Broker settings shared by the standalone and the cluster's brokers; every other key keeps
# Pulsar's default.
BROKER_CONFIG: dict[str, str] = {
    "bindAddress": "127.0.0.1",
    "advertisedAddress": "127.0.0.1",
    "brokerDeleteInactiveTopicsEnabled": "false",
    "managedLedgerDefaultEnsembleSize": "1",
    "managedLedgerDefaultWriteQuorum": "1",
    "managedLedgerDefaultAckQuorum": "1",
    "managedLedgerCacheSizeMB": "64",
    "brokerEntryMetadataInterceptors": INDEX_INTERCEPTOR,
    "webSocketServiceEnabled": "false",
    "functionsWorkerEnabled": "false",
    # Topics past their namespace's compactionThreshold are compacted within seconds, not a minute.
    "brokerServiceCompactionMonitorIntervalInSeconds": "5",
}

# Bookie settings for one small machine: small caches, and no fsync of the journal (a test
# machine's page cache survives the kill -9 of a process).
BOOKIE_CONFIG: dict[str, str] = {
    "dbStorage_writeCacheMaxSizeMb": "32",
    "dbStorage_readAheadCacheMaxSizeMb": "32",
    "dbStorage_rocksDB_blockCacheSize": "16777216",
    "journalSyncData": "false",
}

# The standalone's conf: one file configures its broker and its bookie.
BASE_CONFIG: dict[str, str] = {
    "clusterName": "standalone",
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
    **BROKER_CONFIG,
    **BOOKIE_CONFIG,
}

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss.SSS}} [%t] %-5level %logger{{1}} - %msg%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


class PulsarNotResolved(RuntimeError):
    """The Apache Pulsar jars are not in the checkout's cache: run ``make pulsar-jars``."""


def classpath() -> str:
    """The resolved classpath, or a clear error saying how to resolve it."""
    if not CLASSPATH_FILE.exists():
        raise PulsarNotResolved(f"Apache Pulsar {PULSAR_VERSION} is not resolved ({CLASSPATH_FILE} is missing): run `make pulsar-jars`")
    return CLASSPATH_FILE.read_text().strip()


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` from the PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def free_port() -> int:
    """A TCP port free on loopback at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_properties(path: Path, settings: Mapping[str, str]) -> Path:
    """Write ``key=value`` lines (Java properties, as Pulsar's and ZooKeeper's confs are)."""
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


class JavaProcess:
    """One JVM started from Pulsar's classpath, logging to ``<name>.log`` in its work dir; stopped by pid."""

    def __init__(
        self,
        name: str,
        work_dir: Path,
        main_class: str,
        args: Sequence[str],
        heap: str,
        log_level: str = "info",
        jvm_options: Sequence[str] = (),
    ):
        self.name = name
        self.work_dir = work_dir
        self.main_class = main_class
        self.args = list(args)
        self.heap = heap
        self.log_level = log_level
        self.jvm_options = list(jvm_options)
        self.log_path = work_dir / f"{name}.log"
        self.stdout_path = work_dir / f"{name}.out"
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Launch the JVM (without waiting for anything)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log_conf = self.work_dir / f"log4j2-{self.name}.properties"
        log_conf.write_text(LOG4J2.format(log=self.log_path, level=self.log_level))
        command = [
            java_executable(),
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            f"-XX:MaxDirectMemorySize={self.heap}",
            "-XX:+UseG1GC",
            *JVM_OPTIONS,
            *sharing_options(CLASS_ARCHIVE),
            *self.jvm_options,
            f"-Dlog4j.configurationFile={log_conf}",
            "-cp",
            classpath(),
            self.main_class,
            *self.args,
        ]
        with open(self.stdout_path, "ab") as out:  # the child keeps its own copy of the descriptor
            self.popen = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=self.work_dir)

    @property
    def running(self) -> bool:
        """Whether the JVM is alive."""
        return self.popen is not None and self.popen.poll() is None

    def check_running(self) -> None:
        """Raise, with the end of its logs, if the JVM has exited."""
        if self.popen is None or self.popen.poll() is not None:
            code = None if self.popen is None else self.popen.returncode
            raise RuntimeError(f"{self.name} ({self.main_class}) exited with {code}:\n{self.log_tail()}")

    def wait_exit(self, timeout: float) -> int:
        """Wait for a JVM that ends by itself (a one-shot tool); raise with its logs if it fails or
        outlasts ``timeout`` seconds (then it is killed)."""
        assert self.popen is not None
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.name} ran over {timeout:.0f} s:\n{self.log_tail()}") from None
        self.popen = None
        if code != 0:
            raise RuntimeError(f"{self.name} ({self.main_class}) exited with {code}:\n{self.log_tail()}")
        return code

    def log_tail(self, size: int = 4000) -> str:
        """The last ``size`` characters of its stdout and of its log."""
        parts = []
        for path in (self.stdout_path, self.log_path):
            if path.exists():
                parts.append(path.read_text(errors="replace")[-size:])
        return "\n".join(parts)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait (kill -9 after ``timeout`` seconds); returns the exit code."""
        if self.popen is None:
            return 0
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            code = self.popen.wait(timeout=30)
        self.popen = None
        return code

    def kill(self) -> None:
        """kill -9 of this pid, as a crash."""
        if self.popen is not None:
            self.popen.kill()
            self.popen.wait(timeout=30)
            self.popen = None

    def rss_bytes(self) -> int:
        """Resident memory of the JVM, from /proc (0 when it is not running)."""
        if self.popen is None:
            return 0
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


def wait_until_serving(web_url: str, jvm: JavaProcess, deadline: float, headers: Mapping[str, str] | None = None) -> None:
    """Wait until a broker's admin REST lists ``public/default``; kill -9 it and raise if it does not in time."""
    while time.monotonic() < deadline:
        jvm.check_running()
        try:
            response = httpx.get(web_url + "/admin/v2/namespaces/public", headers=headers, timeout=2)
            if response.status_code == 200 and "public/default" in response.json():
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(0.25)
    jvm.kill()
    raise RuntimeError(f"{jvm.name} was not ready in time:\n{jvm.log_tail()}")


class AdminRest:
    """``admin()`` and ``topic_stats()`` over a broker's ``web_url``; redirects to the owning broker are followed."""

    web_url: str
    admin_headers: dict[str, str] = {}

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One admin REST call, e.g. ``admin("GET", "/admin/v2/persistent/public/default")``."""
        headers = {**self.admin_headers, **kwargs.pop("headers", {})}
        return httpx.request(method, self.web_url + path, headers=headers, timeout=30, follow_redirects=True, **kwargs)

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """The /stats document of a short topic name in public/default."""
        response = self.admin("GET", f"/admin/v2/persistent/public/default/{topic}/stats")
        response.raise_for_status()
        return response.json()


class PulsarStandalone(AdminRest):
    """One Apache Pulsar standalone JVM (broker, bookie, RocksDB metadata) and its URLs.

    ``admin_token`` is the token the launcher's own admin calls carry (readiness included) when the
    configuration turns authentication on. With ``tls`` (the configuration then names the
    certificate files) the broker also serves ``pulsar+ssl://`` and ``https://`` on ports of their
    own, as ``tls_service_url`` and ``tls_web_url``; readiness is still asked over plain HTTP.
    ``transaction_coordinators`` > 0 turns transactions on
    (``transactionCoordinatorEnabled``) with that many coordinators: before the first start,
    ``pulsar initialize-transaction-coordinator-metadata`` creates the ``pulsar/system`` namespace
    and the partitioned topic ``transaction_coordinator_assign`` with one partition per coordinator
    (the standalone itself would create it with one).
    """

    name = "pulsar"

    def __init__(
        self,
        work_dir: Path,
        config: Mapping[str, str] | None = None,
        heap: str = "512m",
        log_level: str = "info",
        admin_token: str | None = None,
        jvm_options: Sequence[str] = (),
        tls: bool = False,
        transaction_coordinators: int = 0,
    ):
        self.tls = tls
        self.tls_port = 0
        self.https_port = 0
        self.admin_headers = {"Authorization": f"Bearer {admin_token}"} if admin_token else {}
        self.work_dir = work_dir
        self.config = {**BASE_CONFIG, **(config or {})}
        self.transaction_coordinators = transaction_coordinators
        if transaction_coordinators:
            self.config["transactionCoordinatorEnabled"] = "true"
        self.heap = heap
        self.log_level = log_level
        self.jvm_options = list(jvm_options)
        self.port = 0
        self.http_port = 0
        self.bookie_port = 0
        self.jvm: JavaProcess | None = None
        self.log_path = work_dir / "pulsar.log"
        self.startup_seconds = 0.0

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running JVM's process, None when stopped."""
        return self.jvm.popen if self.jvm is not None else None

    @property
    def running(self) -> bool:
        """Whether the JVM is alive."""
        return self.jvm is not None and self.jvm.running

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def tls_service_url(self) -> str:
        """The broker's ``pulsar+ssl://`` URL (with ``tls``)."""
        return f"pulsar+ssl://127.0.0.1:{self.tls_port}"

    @property
    def tls_web_url(self) -> str:
        """The broker's ``https://`` URL (with ``tls``)."""
        return f"https://127.0.0.1:{self.https_port}"

    def start(self, timeout: float = STARTUP_TIMEOUT) -> PulsarStandalone:
        """Start the JVM and wait until the default namespace is served."""
        began = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:  # keep the ports across restarts, so clients reconnect
            self.port, self.http_port, self.bookie_port = free_port(), free_port(), free_port()
            if self.tls:
                self.tls_port, self.https_port = free_port(), free_port()
        settings = {**self.config, "brokerServicePort": str(self.port), "webServicePort": str(self.http_port)}
        if self.tls:
            settings |= {"brokerServicePortTls": str(self.tls_port), "webServicePortTls": str(self.https_port)}
        conf = write_properties(self.work_dir / "standalone.conf", settings)
        metadata_dir = self.work_dir / "metadata"
        if self.transaction_coordinators and not metadata_dir.exists():
            self._initialize_transaction_metadata(metadata_dir, began + timeout)
        self.jvm = JavaProcess(
            "pulsar",
            self.work_dir,
            "org.apache.pulsar.PulsarStandaloneStarter",
            [
                "--config",
                str(conf),
                "-nfw",
                "-nss",
                "--metadata-dir",
                str(metadata_dir),
                "--bookkeeper-dir",
                str(self.work_dir / "bookkeeper"),
                "--bookkeeper-port",
                str(self.bookie_port),
                "--advertised-address",
                "127.0.0.1",
            ],
            self.heap,
            self.log_level,
            self.jvm_options,
        )
        self.jvm.start()
        wait_until_serving(self.web_url, self.jvm, began + timeout, self.admin_headers)
        self.startup_seconds = time.monotonic() - began
        return self

    def _initialize_transaction_metadata(self, metadata_dir: Path, deadline: float) -> None:
        """``pulsar initialize-transaction-coordinator-metadata`` on the standalone's metadata store (RocksDB)."""
        setup = JavaProcess(
            "initialize-transaction-coordinator-metadata",
            self.work_dir,
            "org.apache.pulsar.PulsarTransactionCoordinatorMetadataSetup",
            [
                "--configuration-store",
                f"rocksdb://{metadata_dir}",
                "--cluster",
                self.config["clusterName"],
                "--initial-num-transaction-coordinators",
                str(self.transaction_coordinators),
            ],
            "128m",
            self.log_level,
            self.jvm_options,
        )
        setup.start()
        setup.wait_exit(max(1.0, deadline - time.monotonic()))

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait (kill -9 after ``timeout`` seconds); returns the exit code."""
        return self.jvm.stop(timeout) if self.jvm is not None else 0

    def kill(self) -> None:
        """kill -9, as a crash."""
        if self.jvm is not None:
            self.jvm.kill()

    def restart(self, crash: bool = False) -> PulsarStandalone:
        """Stop (or kill -9) and start again on the same ports and data."""
        if crash:
            self.kill()
        else:
            self.stop()
        return self.start()

    def rss_bytes(self) -> int:
        """Resident memory of the JVM, from /proc."""
        return self.jvm.rss_bytes() if self.jvm is not None else 0


class ForegroundServer(Protocol):
    """What ``run_in_foreground`` starts and stops: the standalone or the cluster."""

    def start(self) -> Any: ...
    def stop(self) -> Any: ...


def run_in_foreground(server: ForegroundServer, work: Path, describe: Callable[[], str], wait: Callable[[], None]) -> int:
    """Start ``server``, print ``describe()``, ``wait()``; on Ctrl-C or SIGTERM stop it and remove ``work``."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the JVMs too, as Ctrl-C does

    signal.signal(signal.SIGTERM, interrupt)
    try:
        server.start()
        print(f"{describe()}\ndata and logs: {work} (removed on exit); Ctrl-C stops it", flush=True)
        wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    """Run Apache Pulsar standalone in the foreground until Ctrl-C or SIGTERM (``make pulsar``)."""
    work = Path(tempfile.mkdtemp(prefix="apache-pulsar-"))
    pulsar = PulsarStandalone(work)

    def wait() -> None:
        assert pulsar.process is not None
        pulsar.process.wait()

    return run_in_foreground(
        pulsar,
        work,
        lambda: (
            f"Apache Pulsar {PULSAR_VERSION} ready in {pulsar.startup_seconds:.0f} s: "
            f"service_url={pulsar.service_url} web_service_url={pulsar.web_url}"
        ),
        wait,
    )


if __name__ == "__main__":
    sys.exit(main())
