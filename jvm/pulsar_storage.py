"""The storage side of the Pulsar cluster: ZooKeeper (metadata) and BookKeeper bookies (ledgers).

Each is one JVM from Pulsar's classpath on loopback, with its data in its own work dir; each can
be killed with -9 and started again on the same port and data, as a crashed server restarts.
``jvm/pulsar_cluster.py`` puts them together with the brokers.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

from jvm.apache_pulsar import BOOKIE_CONFIG, QUICK_JIT, JavaProcess, free_port, write_properties

# A line of ZooKeeper's ``dump`` that opens a session's ephemeral nodes, e.g. ``0x1000a2b3c4d0000:``.
_SESSION_LINE = re.compile(r"^(0x[0-9a-f]+):$")


def four_letter_word(port: int, word: bytes) -> str:
    """ZooKeeper's answer to a four-letter command ('' if it does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(word)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def wait_for(what: str, ready: Callable[[], bool], jvm: JavaProcess, deadline: float) -> None:
    """Poll ``ready`` until it holds; kill -9 the JVM and raise if it exits or the deadline passes."""
    while time.monotonic() < deadline:
        jvm.check_running()
        if ready():
            return
        time.sleep(0.2)
    jvm.kill()
    raise RuntimeError(f"{what} was not ready in time:\n{jvm.log_tail()}")


class ZooKeeper:
    """A single ZooKeeper server: the metadata store and the configuration store of the cluster."""

    def __init__(self, work_dir: Path, heap: str = "128m"):
        self.work_dir = work_dir
        self.heap = heap
        self.port = free_port()
        self.jvm: JavaProcess | None = None

    @property
    def metadata_url(self) -> str:
        """The metadata store URL brokers and tools take (``zk:host:port``)."""
        return f"zk:127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether its JVM is alive."""
        return self.jvm is not None and self.jvm.running

    def launch(self) -> None:
        """Start the JVM on the server's port and data dir; :meth:`wait_serving` waits for it."""
        config = {
            "tickTime": "1000",  # sessions may be as short as two ticks
            "initLimit": "10",
            "syncLimit": "5",
            "dataDir": str(self.work_dir / "data"),
            "clientPort": str(self.port),
            "clientPortAddress": "127.0.0.1",
            "admin.enableServer": "false",  # its Jetty would take port 8080
            "maxClientCnxns": "0",
            "forceSync": "no",
            "4lw.commands.whitelist": "ruok,dump",
        }
        (self.work_dir / "data").mkdir(parents=True, exist_ok=True)
        zoo_cfg = write_properties(self.work_dir / "zoo.cfg", config)
        self.jvm = JavaProcess(
            "zookeeper",
            self.work_dir,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            [str(zoo_cfg)],
            self.heap,
            jvm_options=QUICK_JIT,
        )
        self.jvm.start()

    def wait_serving(self, deadline: float) -> None:
        """Wait until the server answers ``ruok``."""
        assert self.jvm is not None
        wait_for("ZooKeeper", lambda: four_letter_word(self.port, b"ruok") == "imok", self.jvm, deadline)

    def kill(self) -> None:
        """kill -9 of the server's pid, as a crash; its sessions outlive it in the data dir."""
        if self.jvm is not None:
            self.jvm.kill()

    def stop(self) -> None:
        """SIGTERM and wait (kill -9 after 30 s)."""
        if self.jvm is not None:
            self.jvm.stop()

    def ephemeral_nodes(self) -> dict[str, str]:
        """Each ephemeral node (bookie registrations, broker locks) and the session that holds it,
        from ZooKeeper's ``dump``."""
        owners: dict[str, str] = {}
        session = ""
        for line in four_letter_word(self.port, b"dump").splitlines():
            opening = _SESSION_LINE.match(line.strip())
            if opening:
                session = opening.group(1)
            elif line.startswith("\t/") and session:
                owners[line.strip()] = session
        return owners


class Bookie:
    """One BookKeeper bookie, registered in ZooKeeper through Pulsar's metadata-store driver."""

    def __init__(self, name: str, work_dir: Path, zookeeper: ZooKeeper, heap: str = "192m"):
        self.name = name
        self.work_dir = work_dir
        self.zookeeper = zookeeper
        self.heap = heap
        self.port = free_port()
        self.jvm: JavaProcess | None = None
        # The ZooKeeper session of the last registration seen: a bookie started again after a kill
        # is registered once a new session holds its node (the killed one's lingers until it expires).
        self.session = ""

    @property
    def bookie_id(self) -> str:
        """How BookKeeper names this bookie in ensembles and registrations (``127.0.0.1:port``)."""
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether its JVM is alive."""
        return self.jvm is not None and self.jvm.running

    def launch(self) -> None:
        """Start the JVM on the bookie's port and data dirs; :meth:`wait_registered` waits for it."""
        config = {
            "bookiePort": str(self.port),
            "advertisedAddress": "127.0.0.1",
            "allowLoopback": "true",
            "metadataServiceUri": f"metadata-store:{self.zookeeper.metadata_url}",  # as the metadata setup formatted it
            "zkTimeout": "30000",  # Pulsar's bookkeeper.conf: a busy machine must not expire the bookie's session
            "journalDirectories": str(self.work_dir / "journal"),
            "ledgerDirectories": str(self.work_dir / "ledgers"),
            "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
            "httpServerEnabled": "false",
            # A killed bookie comes back with its data; re-replication is not what the tests exercise.
            "autoRecoveryDaemonEnabled": "false",
            "numReadWorkerThreads": "2",
            "numHighPriorityWorkerThreads": "1",
            **BOOKIE_CONFIG,
        }
        conf = write_properties(self.work_dir / "bookkeeper.conf", config)
        self.jvm = JavaProcess(
            self.name,
            self.work_dir,
            "org.apache.bookkeeper.server.Main",
            ["--conf", str(conf)],
            self.heap,
            jvm_options=QUICK_JIT,
        )
        self.jvm.start()

    def wait_registered(self, deadline: float) -> None:
        """Wait until a new ZooKeeper session holds the bookie's registration (an ephemeral node)."""
        assert self.jvm is not None
        node = f"/ledgers/available/{self.bookie_id}"
        previous = self.session

        def registered() -> bool:
            self.session = self.zookeeper.ephemeral_nodes().get(node, "")
            return self.session not in ("", previous)

        wait_for(self.name, registered, self.jvm, deadline)

    def kill(self) -> None:
        """kill -9 of the bookie's pid, as a crash."""
        if self.jvm is not None:
            self.jvm.kill()

    def stop(self) -> None:
        """SIGTERM and wait (kill -9 after 30 s)."""
        if self.jvm is not None:
            self.jvm.stop()
