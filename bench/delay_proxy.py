"""A TCP proxy in front of a broker's admin HTTP port that delays every byte by a fixed time each
way, as a broker that far away would, and counts the HTTP requests in flight through it.

Each direction of each connection forwards what it reads ``delay`` seconds later, in order, so a
round trip costs twice the delay and the connection's bandwidth is not limited. A request is in
flight from the first bytes the client sends on an idle connection until the first bytes of the
answer (HTTP/1.1 without pipelining: one request at a time per connection), so the peak counts
the admin calls a client had in flight at once, whatever the broker. It runs its own event loop
in a thread, so blocking and asyncio clients use it alike::

    with DelayProxy("127.0.0.1", broker_http_port, delay=0.010) as proxy:
        PulsarAdmin(proxy.url).message_backlog(...)
        print(proxy.peak_in_flight)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import TracebackType

_CHUNK = 65536


class DelayProxy:
    """Forward TCP connections from a free local port to ``upstream_host:upstream_port``, each byte
    ``delay`` seconds late each way; ``peak_in_flight`` is the most requests ever in flight at once."""

    def __init__(self, upstream_host: str, upstream_port: int, delay: float = 0.0):
        self.upstream = (upstream_host, upstream_port)
        self.delay = delay
        self.requests = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """The proxy's ``http://`` URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> DelayProxy:
        """Listen on a free port of 127.0.0.1."""
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def reset(self) -> None:
        """Count afresh from now (the requests already in flight stay in flight)."""
        self.requests, self.peak_in_flight = 0, self.in_flight

    def close(self) -> None:
        """Stop listening, end the connections and the loop's thread."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._shut(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    async def _shut(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()
        await asyncio.sleep(0)

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        self._writers |= {client_writer, upstream_writer}
        waiting = [False]  # this connection's request sent and not yet answered
        await asyncio.gather(
            self._pump(client_reader, upstream_writer, lambda: self._asked(waiting)),
            self._pump(upstream_reader, client_writer, lambda: self._answered(waiting)),
            return_exceptions=True,
        )
        self._writers -= {client_writer, upstream_writer}
        if waiting[0]:
            self._answered(waiting)

    def _asked(self, waiting: list[bool]) -> None:
        if not waiting[0]:
            waiting[0] = True
            self.requests += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _answered(self, waiting: list[bool]) -> None:
        if waiting[0]:
            waiting[0] = False
            self.in_flight -= 1

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_data: Callable[[], None]) -> None:
        """Read from one side and write to the other ``delay`` seconds later, in order."""
        loop = asyncio.get_running_loop()
        late: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await late.get()
                if not data:
                    break
                pause = due - loop.time()
                if pause > 0:
                    await asyncio.sleep(pause)
                writer.write(data)
                await writer.drain()
            writer.close()

        delivering = asyncio.ensure_future(deliver())
        try:
            while data := await reader.read(_CHUNK):
                on_data()
                late.put_nowait((loop.time() + self.delay, data))
        finally:
            late.put_nowait((loop.time() + self.delay, b""))
            await delivering
