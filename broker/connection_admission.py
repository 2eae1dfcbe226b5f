"""How many connections the broker holds, in all and per client address, and the refusal of one
more past Pulsar's ``brokerMaxConnections`` or ``brokerMaxConnectionsPerIp`` (0: no limit)."""

from __future__ import annotations

from collections import Counter


class ConnectionAdmission:
    """Counts open connections; :meth:`admit` one, :meth:`release` it when it closes."""

    def __init__(self, max_connections: int = 0, max_per_address: int = 0):
        self.max_connections = max_connections
        self.max_per_address = max_per_address
        self._total = 0
        self._by_address: Counter[str] = Counter()

    def admit(self, address: str, port: int) -> str | None:
        """Count a new connection from ``address``, or return why it is refused (in Pulsar's
        words: its ERROR message) without counting it."""
        if self.max_connections and self._total >= self.max_connections:
            return "Reached the maximum number of connections"
        if self.max_per_address and self._by_address[address] >= self.max_per_address:
            # Pulsar appends Java's SocketAddress text, "/ip:port", without a space.
            return f"Reached the maximum number of connections on address/{address}:{port}"
        self._total += 1
        self._by_address[address] += 1
        return None

    def release(self, address: str) -> None:
        """A connection :meth:`admit` counted has closed."""
        self._total -= 1
        self._by_address[address] -= 1
        if not self._by_address[address]:
            del self._by_address[address]
