"""Automatic cluster failover: probe the cluster in use, move the client to a secondary when it
fails, and back to the primary once it answers again (``pulsar.AutoClusterFailover``).

A probe is a TCP connect to each host of a ServiceInfo's URL in turn, as the C++ client makes it.
Every ``check_interval_ms`` the provider probes the cluster in use; ``failover_threshold``
consecutive failures switch to the first secondary that answers (or, from a secondary, to the
primary if it answers, else another secondary). On a secondary, ``switch_back_threshold``
consecutive good probes of the primary switch back to it.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from .arguments import check_type
from .service_info import ServiceInfo, ServiceInfoProvider

__all__ = ["AutoClusterFailover", "ClusterFailoverProvider", "is_reachable"]

log = logging.getLogger(__name__)

# How long one host's probe may take (the C++ client's figure).
PROBE_TIMEOUT_SECONDS = 30.0


class AutoClusterFailover:
    """Failover settings for :class:`~.client.Client`, given as its ``service_url``."""

    def __init__(
        self,
        primary: ServiceInfo,
        secondary: list[ServiceInfo],
        check_interval_ms: int = 5000,
        failover_threshold: int = 1,
        switch_back_threshold: int = 1,
    ):
        check_type(ServiceInfo, primary, "primary")
        check_type(list, secondary, "secondary")
        check_type(int, check_interval_ms, "check_interval_ms")
        check_type(int, failover_threshold, "failover_threshold")
        check_type(int, switch_back_threshold, "switch_back_threshold")
        if not secondary:
            raise ValueError("Argument secondary is expected to contain at least one ServiceInfo")
        for index, info in enumerate(secondary):
            check_type(ServiceInfo, info, f"secondary[{index}]")
        for name, value in (
            ("check_interval_ms", check_interval_ms),
            ("failover_threshold", failover_threshold),
            ("switch_back_threshold", switch_back_threshold),
        ):
            if value <= 0:
                raise ValueError(f"Argument {name} is expected to be greater than 0")
        self.primary = primary
        self.secondary = list(secondary)
        self.check_interval_ms = check_interval_ms
        self.failover_threshold = failover_threshold
        self.switch_back_threshold = switch_back_threshold

    def __repr__(self) -> str:
        return (
            f"AutoClusterFailover(primary={self.primary!r}, secondary={self.secondary!r}, "
            f"check_interval_ms={self.check_interval_ms!r}, failover_threshold={self.failover_threshold!r}, "
            f"switch_back_threshold={self.switch_back_threshold!r})"
        )


def is_reachable(info: ServiceInfo, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """Whether some host of ``info`` accepts a TCP connection."""
    for host, port in info.hosts:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return True
        except OSError:
            continue
    return False


class ClusterFailoverProvider(ServiceInfoProvider):
    """The :class:`ServiceInfoProvider` behind an :class:`AutoClusterFailover`: a probing thread."""

    def __init__(self, config: AutoClusterFailover, probe: Callable[[ServiceInfo], bool] = is_reachable):
        self._config = config
        self._probe = probe
        self._current = config.primary
        self._failures = 0
        self._recoveries = 0
        self._update: Callable[[ServiceInfo], None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def initial_service_info(self) -> ServiceInfo:
        """The primary."""
        return self._config.primary

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        """Start probing every ``check_interval_ms``."""
        self._update = on_service_info_update
        self._stop = threading.Event()  # a new one in a forked child: the parent's thread may have held its lock
        self._thread = threading.Thread(target=self._run, name="pulsar-cluster-failover", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop probing."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._config.check_interval_ms / 1000):
            self.check()

    def check(self) -> None:
        """One round of probes, switching clusters if the thresholds are met."""
        primary = self._config.primary
        if self._current is primary:
            if self._probe(primary):
                self._failures = 0
                return
            self._failures += 1
            if self._failures >= self._config.failover_threshold:
                self._switch_to_secondary(excluded=None)
            return
        if self._probe(self._current):
            self._failures = 0
            self._check_switch_back(self._probe(primary))
            return
        self._failures += 1
        if self._failures < self._config.failover_threshold:
            self._check_switch_back(self._probe(primary))
        elif self._probe(primary):
            self._switch_to(primary)
        elif not self._switch_to_secondary(excluded=self._current):
            self._check_switch_back(False)

    def _switch_to_secondary(self, excluded: ServiceInfo | None) -> bool:
        for info in self._config.secondary:
            if info is not excluded and self._probe(info):
                self._switch_to(info)
                return True
        return False

    def _check_switch_back(self, primary_available: bool) -> None:
        if not primary_available:
            self._recoveries = 0
            return
        self._recoveries += 1
        if self._recoveries >= self._config.switch_back_threshold:
            self._switch_to(self._config.primary)

    def _switch_to(self, info: ServiceInfo) -> None:
        if info is self._current:
            return
        log.info("switching service URL from %s to %s", self._current.service_url, info.service_url)
        self._current = info
        self._failures = 0
        self._recoveries = 0
        if self._update is not None:
            self._update(info)
