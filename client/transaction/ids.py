"""The id of a transaction, as the coordinator hands it out and every command carries it."""

from __future__ import annotations

from typing import NamedTuple

from ..protocol.PulsarApi_pb2 import MessageMetadata

__all__ = ["TxnId"]


class TxnId(NamedTuple):
    """A transaction id: ``most_bits`` is the id of the coordinator that owns the transaction,
    ``least_bits`` its sequence there (Pulsar's TxnID, printed ``(most,least)`` as Java prints it)."""

    most_bits: int
    least_bits: int

    @property
    def coordinator_id(self) -> int:
        """The coordinator (partition of the assign topic) every request for this transaction goes to."""
        return self.most_bits

    def fields(self) -> dict[str, int]:
        """The ``txnid_least_bits`` and ``txnid_most_bits`` fields of a command naming this transaction."""
        return {"txnid_least_bits": self.least_bits, "txnid_most_bits": self.most_bits}

    def stamp(self, metadata: MessageMetadata) -> None:
        """Write this id into the metadata of an entry sent in the transaction (as the Java client does)."""
        metadata.txnid_least_bits = self.least_bits
        metadata.txnid_most_bits = self.most_bits

    def __str__(self) -> str:
        return f"({self.most_bits},{self.least_bits})"
