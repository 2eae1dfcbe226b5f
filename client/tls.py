"""TLS for a connection that one thread reads while other threads write.

OpenSSL forbids using one SSL object from two threads at once, and CPython's ``ssl.SSLSocket``
releases the GIL inside SSL_read and SSL_write without a per-socket lock: a reader thread
blocked in ``recv`` while a caller thread runs ``sendall`` races inside OpenSSL and can crash.
Here the TLS state is an ``ssl.SSLObject`` over memory buffers and the plain socket carries the
bytes. Every TLS call works on memory only, never blocks, and runs under one short lock; the
socket reads and writes happen outside it, so a blocked read never holds up a write.
"""

from __future__ import annotations

import socket
import ssl
import threading
from dataclasses import dataclass

from .auth import Authentication, load_client_certificate

_RECV_SIZE = 256 * 1024
_MAX_RECORD = 16 * 1024  # TLS plaintext per record: one read returns at most this much


class TlsStream:
    """A TLS client stream over a connected socket: ``sendall``/``recv`` like a socket, thread-safe
    for one reading thread and any number of writing threads."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str):
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self._tls_lock = threading.Lock()  # held around every SSLObject call
        # Held while records leave for the socket, so they go out in the order TLS made them.
        self._send_lock = threading.Lock()

    def handshake(self) -> None:
        """Run the TLS handshake, certificate checks included, within the socket's timeout."""
        while True:
            try:
                with self._tls_lock:
                    self._tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                if not self._receive():
                    raise ConnectionResetError("the server closed the connection during the TLS handshake") from None

    def sendall(self, data: bytes) -> None:
        """Encrypt and write all of ``data``."""
        with self._send_lock:
            with self._tls_lock:
                self._tls.write(data)
                records = self._outgoing.read()
            self._sock.sendall(records)

    def recv(self, bufsize: int) -> bytes:
        """Up to ``bufsize`` decrypted bytes, blocking until some arrive; b"" once the peer closed."""
        while True:
            with self._tls_lock:
                data = self._decrypted(bufsize)
                reply = self._outgoing.pending > 0  # e.g. an answer to a TLS 1.3 key update
            if reply:
                self._flush()
            if data is not None:
                return data
            if not self._receive():
                return b""

    def _decrypted(self, bufsize: int) -> bytes | None:
        """What is decrypted already (b"" after the peer's close_notify); None if more input is needed."""
        chunks: list[bytes] = []
        size = 0
        try:
            while size < bufsize:
                chunk = self._tls.read(min(bufsize - size, _MAX_RECORD))
                if not chunk:  # close_notify: hand out what came before it, b"" on the next call
                    return b"".join(chunks)
                chunks.append(chunk)
                size += len(chunk)
        except ssl.SSLWantReadError:
            if not chunks:
                return None
        return b"".join(chunks)

    def _receive(self) -> bool:
        """Read ciphertext from the socket into TLS; False at end of stream."""
        data = self._sock.recv(_RECV_SIZE)
        if not data:
            return False
        with self._tls_lock:
            self._incoming.write(data)
        return True

    def _flush(self) -> None:
        with self._send_lock:
            with self._tls_lock:
                records = self._outgoing.read()
            if records:
                self._sock.sendall(records)

    # ---- the socket calls a connection makes besides reading and writing ----

    def settimeout(self, timeout: float | None) -> None:
        """Timeout of the underlying socket's reads and writes."""
        self._sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        """Shut the underlying socket down (wakes a blocked reader)."""
        self._sock.shutdown(how)

    def close(self) -> None:
        """Close the underlying socket."""
        self._sock.close()


@dataclass(frozen=True)
class TlsOptions:
    """A client's TLS settings; :meth:`context` makes the SSL context for one cluster's trust store."""

    allow_insecure_connection: bool
    validate_hostname: bool
    certificate_file: str | None
    private_key_file: str | None

    def context(self, trust_certs_file: str | None, authentication: Authentication | None = None) -> ssl.SSLContext:
        """An SSL context trusting ``trust_certs_file`` (None: the system's CAs), presenting the
        client certificate of ``authentication`` (AuthenticationTLS) or else the one set here."""
        context = ssl.create_default_context(cafile=trust_certs_file)
        if self.allow_insecure_connection:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context.check_hostname = self.validate_hostname
        load_client_certificate(context, authentication, self.certificate_file, self.private_key_file)
        return context
