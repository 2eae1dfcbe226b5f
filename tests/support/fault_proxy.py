"""A TCP proxy for fault injection: it sits between clients and the broker and, on command, cuts
connections in the middle of a frame, stalls traffic, drops it, partitions the network (silences
its connections for good), swallows one kind of command, or holds back one kind of command until
resumed, letting the rest overtake it.

In ``framed`` mode (the binary protocol port) it forwards whole Pulsar frames, so it can cut a
connection inside a frame of a chosen command type, and it rewrites lookup answers to point at
itself, as a Pulsar proxy does, so every connection a client opens goes through it. Unframed mode
(the admin HTTP port) forwards bytes as they come.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from airflow_pulsar.client.protocol.frames import encode_command
from airflow_pulsar.client.protocol.PulsarApi_pb2 import BaseCommand

T = BaseCommand.Type
TO_BROKER = "to_broker"
TO_CLIENT = "to_client"
_U32 = struct.Struct(">I")


def frame_kind(frame: bytes | bytearray) -> int | None:
    """The command type of a whole frame (``[u32 total][u32 cmd size][BaseCommand]...``), if it leads with it."""
    # BaseCommand's first field is ``type`` (field 1, varint): tag 0x08 and a one-byte value.
    if len(frame) >= 10 and frame[8] == 0x08 and frame[9] < 0x80:
        return frame[9]
    return None


def split_frames(buffer: bytearray) -> Iterator[bytes]:
    """Take every whole frame off the front of ``buffer``."""
    pos = 0
    while len(buffer) - pos >= 4:
        (total,) = _U32.unpack_from(buffer, pos)
        if len(buffer) - pos - 4 < total:
            break
        yield bytes(buffer[pos : pos + 4 + total])
        pos += 4 + total
    del buffer[:pos]


@dataclass(eq=False)
class _Pair:
    """One proxied connection: the client's socket and ours to the upstream."""

    client: socket.socket
    upstream: socket.socket
    closed: bool = False
    silenced: bool = False  # caught in a partition: nothing it carries arrives any more

    def abort(self) -> None:
        """Close both sides at once, with a reset, as a failing network would."""
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.upstream):
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)  # wakes the pump blocked in recv
            except OSError:
                pass
            sock.close()


@dataclass
class _CutOrder:
    """Cut the next connection that carries a frame of ``kind`` (any kind when None) in ``direction``."""

    direction: str
    kind: int | None
    done: threading.Event = field(default_factory=threading.Event)


class FaultProxy:
    """A proxy on 127.0.0.1 (a free port) in front of ``upstream``; see the module docstring."""

    def __init__(self, upstream_host: str, upstream_port: int, *, framed: bool = True):
        self.upstream = (upstream_host, upstream_port)
        self.framed = framed
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._resumed = threading.Condition(self._lock)
        self._pairs: set[_Pair] = set()
        self._orders: list[_CutOrder] = []
        self._swallowed: set[tuple[str, int]] = set()
        self._held: set[tuple[str, int]] = set()
        # Frames forwarded, by direction and command type (framed mode).
        self.forwarded: Counter[tuple[str, int | None]] = Counter()
        self._stalled = False
        self._dropping = False
        self._partitioned = False
        self._stopped = False
        self.connections = 0
        self.faults = 0

    @property
    def service_url(self) -> str:
        """The proxy's ``pulsar://`` URL (framed mode)."""
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        """The proxy's ``http://`` URL (unframed mode, in front of the admin port)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        """Accept connections on a background thread."""
        threading.Thread(target=self._accept_loop, name="fault-proxy-accept", daemon=True).start()
        return self

    def close(self) -> None:
        """Stop accepting and close every proxied connection."""
        with self._lock:
            self._stopped = True
            self._stalled = False
            self._resumed.notify_all()
            pairs = list(self._pairs)
        self._listener.close()
        for pair in pairs:
            pair.abort()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- faults ----

    def cut_inside(self, direction: str, kind: int | None = None) -> threading.Event:
        """Arm a cut: the next frame of ``kind`` going ``direction`` is forwarded only in part
        (its first half), then its connection is reset. The event is set once that happened."""
        order = _CutOrder(direction, kind)
        with self._lock:
            self._orders.append(order)
        return order.done

    def disarm(self) -> int:
        """Cancel the cuts armed but not yet done; returns how many."""
        with self._lock:
            count = len(self._orders)
            self._orders.clear()
        return count

    def cut_all(self) -> int:
        """Reset every open connection now, wherever its frames are; returns how many."""
        with self._lock:
            pairs = [p for p in self._pairs if not p.closed]
            self.faults += 1 if pairs else 0
        for pair in pairs:
            pair.abort()
        return len(pairs)

    def stall(self) -> None:
        """Hold all traffic (both directions) until :meth:`resume`; connections stay open."""
        with self._lock:
            self._stalled = True
            self.faults += 1

    def drop(self) -> None:
        """Discard all traffic (both directions) until :meth:`resume`: a peer that went silent."""
        with self._lock:
            self._dropping = True
            self.faults += 1

    def partition(self) -> None:
        """A network partition that outlasts the connections: every connection open now, and each
        one opened until :meth:`heal`, goes silent both ways for good, and neither end is told
        (each must notice, by keepalive or timeout, and close). Unlike :meth:`drop`, which resumes
        a connection with a gap in its byte stream, this never delivers a byte after one lost, as
        TCP does not; connections opened after the heal work."""
        with self._lock:
            self._partitioned = True
            for pair in self._pairs:
                pair.silenced = True
            self.faults += 1

    def heal(self) -> None:
        """End the partition: connections opened from now on work (those it caught stay silent)."""
        with self._lock:
            self._partitioned = False

    def swallow(self, direction: str, kind: int) -> None:
        """Discard every frame of ``kind`` going ``direction`` until :meth:`resume`; the rest flows."""
        with self._lock:
            self._swallowed.add((direction, kind))
            self.faults += 1

    def hold(self, direction: str, kind: int) -> None:
        """Hold back the frames of ``kind`` going ``direction`` until :meth:`resume`, which delivers
        them; every other frame flows past them meanwhile."""
        with self._lock:
            self._held.add((direction, kind))
            self.faults += 1

    def resume(self) -> None:
        """Forward traffic again (what a stall or hold kept is delivered; what was dropped is gone)."""
        with self._lock:
            self._stalled = False
            self._dropping = False
            self._swallowed.clear()
            self._held.clear()
            self._resumed.notify_all()

    def open_connections(self) -> int:
        """Proxied connections open right now."""
        with self._lock:
            return sum(1 for p in self._pairs if not p.closed)

    # ---- forwarding ----

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, upstream)
            with self._lock:
                pair.silenced = self._partitioned
                if self._stopped:
                    pair.abort()
                    return
                self._pairs.add(pair)
                self.connections += 1
            for source, target, direction in ((client, upstream, TO_BROKER), (upstream, client, TO_CLIENT)):
                threading.Thread(
                    target=self._pump, args=(pair, source, target, direction), name=f"fault-proxy-{direction}", daemon=True
                ).start()

    def _pump(self, pair: _Pair, source: socket.socket, target: socket.socket, direction: str) -> None:
        buffer = bytearray()
        sending = threading.Lock()  # held frames go out from their own thread

        def send(frames: list[bytes]) -> None:
            with sending:
                target.sendall(b"".join(frames))

        try:
            while True:
                data = source.recv(256 * 1024)
                if not data:
                    break
                if pair.silenced or not self._may_forward():
                    continue
                if not self.framed:
                    target.sendall(data)
                    continue
                buffer += data
                out, cut = self._process(list(split_frames(buffer)), direction, send)
                if out:
                    send(out)
                if cut is not None:
                    pair.abort()
                    cut.done.set()
                    return
        except OSError:
            pass
        finally:
            pair.abort()
            with self._lock:
                self._pairs.discard(pair)

    def _may_forward(self) -> bool:
        """Wait out a stall; False while dropping."""
        with self._lock:
            while self._stalled and not self._stopped:
                self._resumed.wait()
            return not self._dropping

    def _process(
        self, frames: list[bytes], direction: str, send: Callable[[list[bytes]], None]
    ) -> tuple[list[bytes], _CutOrder | None]:
        out: list[bytes] = []
        for frame in frames:
            kind = frame_kind(frame)
            if (direction, kind) in self._held:
                threading.Thread(target=self._release_later, args=(direction, kind, frame, send), daemon=True).start()
                continue
            order = self._take_order(direction, kind)
            if order is not None:
                out.append(frame[: max(1, len(frame) // 2)])
                return out, order
            if (direction, kind) in self._swallowed:
                continue
            if kind == T.LOOKUP_RESPONSE:
                frame = self._through_proxy(frame)
            with self._lock:
                self.forwarded[direction, kind] += 1
            out.append(frame)
        return out, None

    def _release_later(self, direction: str, kind: int | None, frame: bytes, send: Callable[[list[bytes]], None]) -> None:
        with self._lock:
            while (direction, kind) in self._held and not self._stopped:
                self._resumed.wait()
            self.forwarded[direction, kind] += 1
        try:
            send([frame])
        except OSError:
            pass  # the connection is gone

    def _take_order(self, direction: str, kind: int | None) -> _CutOrder | None:
        with self._lock:
            for order in self._orders:
                if order.direction == direction and order.kind in (None, kind):
                    self._orders.remove(order)
                    self.faults += 1
                    return order
        return None

    def _through_proxy(self, frame: bytes) -> bytes:
        """Point a lookup answer at this proxy, so the client's next connection comes here too."""
        (cmd_size,) = _U32.unpack_from(frame, 4)
        command = BaseCommand()
        command.ParseFromString(frame[8 : 8 + cmd_size])
        response = command.lookupTopicResponse
        if response.HasField("brokerServiceUrl"):
            response.brokerServiceUrl = self.service_url
        return encode_command(command)
