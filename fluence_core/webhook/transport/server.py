"""The HTTPS server: a thread per connection, blocking TLS sockets, a strict little HTTP/1.1.

An accept loop (:meth:`WebhookServer.serve_forever`) hands each connection to a thread
of its own, which does the TLS handshake, reads requests straight from the TLS socket,
parses them with :mod:`~fluence_core.webhook.transport.http1` and writes each answer in
one call on a ``TCP_NODELAY`` socket. Why this shape: a webhook's cost is paid on every
pod create, and with one client (the API server, on keep-alive connections) the fewest
wake-ups win, so the thread blocked in the read is the one that answers. The server
selects no ALPN protocol, so the API server speaks HTTP/1.1. The figures behind these
choices, against the standard ``ThreadingHTTPServer``, are in docs/admission-cost.md.

What it guarantees a hostile or slow client cannot do:

* stall the accept loop (the handshake runs in the connection's thread, with a timeout);
* hold a request open past its deadline, however steadily it trickles bytes;
* send a body without a declared length, or larger than ``max_body`` (or a head larger
  than ``http1.MAX_HEAD``);
* take more than ``max_connections`` at once, or ``max_per_client`` from one address,
  from the API server (:mod:`~fluence_core.webhook.transport.fairness` has the rules).

A served keep-alive connection may sit idle for ``idle_timeout``, longer than the API
server keeps an idle connection, so the API server never writes to one the server closed.
Every POST goes to the server's :class:`~fluence_core.webhook.transport.routes.Endpoint`,
so the server knows nothing of admission or reports. :meth:`~WebhookServer.shutdown` is
graceful: it stops accepting, closes idle connections and lets requests finish.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

import orjson

from fluence_core.errors import FluenceError
from fluence_core.log import logger
from fluence_core.webhook.transport import http1
from fluence_core.webhook.transport.fairness import BUSY, BUSY_IDLE_TIMEOUT, IDLE, Slot, Slots
from fluence_core.webhook.transport.routes import Endpoint

MAX_BODY = 4 * 1024 * 1024
"""Bytes a body may have whatever its endpoint allows."""
READ_TIMEOUT = 10.0
"""Seconds a connection may sit idle or take over a handshake or a body."""
REQUEST_DEADLINE = 10.0
"""Seconds from the start of a handshake or of waiting for a request to its last byte read."""
MAX_PER_CLIENT = 128
"""Connections one address may hold at once (the API server keeps a pool of them)."""
MAX_CONNECTIONS = 512
"""Connections served at once."""
RESERVED = 64
"""Of ``MAX_CONNECTIONS``, those kept for the API server (:mod:`.fairness`, rule 3)."""
IDLE_TIMEOUT = 120.0
"""Seconds a served keep-alive connection may wait for its next request."""
BACKLOG = 128
"""Connections the kernel queues before the accept loop takes them."""
LINGER = 1.0
"""Seconds a refused request's connection reads (and drops) what the client still sends."""
MAX_LINGER = 1024 * 1024
"""Bytes a refused request's connection reads and drops at most."""
_RECV = 64 * 1024


class Loop(Protocol):
    """A periodic task of the webhook process (the orphan sweep), run while the server serves."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class _Gone(Exception):
    """The client closed the connection, went silent past a timeout or deadline, or reset it:
    nobody is left to answer."""


def _encode(payload: dict[str, Any]) -> bytes:
    return orjson.dumps(payload)


class _Connection:
    """One client connection, served by its own thread: requests in, answers out."""

    def __init__(self, server: WebhookServer, sock: Any, slot: Slot) -> None:
        self.server = server
        self.sock = sock
        self.slot = slot  # its state: reading or answering (shutdown waits), idle, pending
        self.buffer = bytearray()

    def recv(self, deadline: float, *, idle: bool = False) -> None:
        """More bytes into the buffer, waiting no later than ``deadline`` (monotonic), nor
        longer than the read timeout but while ``idle`` (a served connection's wait)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Gone("deadline passed")
        self.sock.settimeout(left if idle else min(left, self.server.read_timeout))
        try:
            data = self.sock.recv(_RECV)
        except (OSError, ValueError) as error:  # timed out, reset, TLS alert, shut down
            raise _Gone(str(error) or type(error).__name__) from None
        if not data:
            raise _Gone("closed by the client")
        self.buffer += data

    def send(self, data: bytes) -> None:
        self.sock.settimeout(self.server.read_timeout)
        try:
            self.sock.sendall(data)
        except (OSError, ValueError) as error:
            raise _Gone(str(error) or type(error).__name__) from None

    def serve(self, deadline: float) -> None:
        """Requests until the client closes, goes idle too long, or one says ``close``;
        ``deadline`` bounds the first request, waiting for it included."""
        server = self.server
        slot = self.slot
        served = False
        while True:
            if not self.buffer:
                if served:
                    slot.enter(IDLE, time.monotonic())
                if server.stopping:
                    return
                if served:  # the next request's deadline starts at its first byte
                    self.recv(time.monotonic() + server.idle_timeout, idle=True)
                    deadline = time.monotonic() + server.request_deadline
                else:
                    self.recv(deadline)
            elif served:  # pipelined: already begun
                deadline = time.monotonic() + server.request_deadline
            slot.enter(BUSY, time.monotonic())
            if not self.answer(deadline) or server.stopping:
                return
            served = True

    def answer(self, deadline: float) -> bool:
        """Reads one request and sends its answer; whether the connection may serve another."""
        server = self.server
        searched = 0
        while (end := self.buffer.find(b"\r\n\r\n", searched)) < 0:
            if len(self.buffer) > http1.MAX_HEAD:
                return self.refuse(431, f"request head over {http1.MAX_HEAD} bytes", "")
            searched = max(0, len(self.buffer) - 3)
            self.recv(deadline)
        if end > http1.MAX_HEAD:
            return self.refuse(431, f"request head over {http1.MAX_HEAD} bytes", "")
        try:
            head = http1.parse_head(bytes(self.buffer[:end]))
        except http1.BadRequest as bad:
            return self.refuse(bad.status, bad.message, "")
        del self.buffer[:end + 4]
        if head.method == "GET":
            healthy = head.path in ("/healthz", "/readyz", "/livez")
            return self.reply(200 if healthy else 404, b"ok" if healthy else b"not found",
                              http1.TEXT, head)
        if head.method != "POST":
            return self.refuse(405, "only POST is served here", head.path)
        try:
            length = head.content_length()
        except http1.BadRequest as bad:
            return self.refuse(bad.status, bad.message, head.path)
        if length is None:
            return self.refuse(411, "Content-Length is required", head.path)
        endpoint = server.endpoint
        limit = endpoint.limit(head.path)
        if limit is None:
            return self.refuse(404, f"nothing is served at {head.path[:200]!r} on this port",
                               head.path)
        limit = min(limit, server.max_body)
        if length > limit:
            return self.refuse(413, f"body of {length} bytes exceeds {limit}", head.path)
        if head.headers.get("expect", "").lower() == "100-continue":
            self.send(http1.CONTINUE)
        while len(self.buffer) < length:
            self.recv(deadline)
        body = bytes(self.buffer[:length])
        del self.buffer[:length]
        # Read in time: from here the time is the endpoint's, not the client's.
        try:
            reply = endpoint.post(head.path, head.headers, body)
        except Exception as error:  # its own errors are answers; this is a bug
            logger.exception("webhook: POST %s failed", head.path[:200])
            return self.refuse(500, f"internal error: {type(error).__name__}", head.path)
        return self.reply(reply.status, _encode(reply.body), http1.JSON, head)

    def reply(self, status: int, body: bytes, kind: bytes, head: http1.Head) -> bool:
        keep = head.keep_alive and not self.server.stopping
        self.send(http1.response(status, body, kind, close=not keep))
        return keep

    def refuse(self, status: int, message: str, path: str) -> bool:
        """An error in the endpoint's words, and the connection closes (the rest of the
        request is unread)."""
        body = _encode(self.server.endpoint.error(path, status, message))
        self.send(http1.response(status, body, http1.JSON, close=True))
        self.linger()
        return False

    def linger(self) -> None:
        """After an answer sent before the request was read whole: stop sending, and read
        what the client still sends (for up to ``LINGER`` seconds and ``MAX_LINGER`` bytes)
        before the connection closes; closed with unread bytes, the socket would reset and
        could take the answer with it."""
        _wake(self.sock, socket.SHUT_WR)
        until = time.monotonic() + LINGER
        discarded = 0
        try:
            while discarded < MAX_LINGER:
                self.buffer.clear()
                self.recv(until)
                discarded += len(self.buffer)
        except _Gone:
            pass


class WebhookServer:
    """Serves ``endpoint``'s POSTs (and GETs of the health paths) over HTTPS when
    ``ssl_context`` is given, plain HTTP otherwise; a thread per connection; ``loops`` start
    with :meth:`serve_forever` and stop when it returns. See the module docstring for the
    why and the hardening."""

    def __init__(self, address: tuple[str, int], endpoint: Endpoint, *,
                 ssl_context: ssl.SSLContext | None = None, max_body: int = MAX_BODY,
                 timeout: float = READ_TIMEOUT, max_connections: int = MAX_CONNECTIONS,
                 max_per_client: int = MAX_PER_CLIENT, reserved: int | None = None,
                 request_deadline: float = REQUEST_DEADLINE,
                 idle_timeout: float = IDLE_TIMEOUT,
                 busy_idle_timeout: float = BUSY_IDLE_TIMEOUT,
                 loops: Sequence[Loop] = ()) -> None:
        self.endpoint = endpoint
        self.loops = tuple(loops)
        self.idle_timeout = idle_timeout
        self.ssl_context = ssl_context
        self.max_body = max_body
        self.read_timeout = timeout
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.request_deadline = request_deadline
        self.accepted = 0
        """Connections accepted and served so far (the API server's reuse shows here)."""
        self.client_auth = (ssl_context is not None
                            and ssl_context.verify_mode == ssl.CERT_REQUIRED)
        """Whether every connection must present a client certificate (the API server's)."""
        self._guard = threading.Condition()
        self._slots = Slots(max_connections=max_connections, max_per_client=max_per_client,
                            reserved=(max_connections * RESERVED // MAX_CONNECTIONS
                                      if reserved is None else reserved),
                            client_auth=self.client_auth, busy_idle_timeout=busy_idle_timeout)
        self._stop = threading.Event()
        self._idle = threading.Event()  # serve_forever is not running
        self._idle.set()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(BACKLOG)
        except OSError:
            self.socket.close()
            raise
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self._wake_read, self._wake_write = socket.socketpair()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def stopping(self) -> bool:
        """Whether :meth:`shutdown` was called: answers say the connection closes."""
        return self._stop.is_set()

    # -- accepting -----------------------------------------------------------

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept connections until :meth:`shutdown`; the ``loops`` run meanwhile."""
        self._idle.clear()
        for loop in self.loops:
            loop.start()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.socket, selectors.EVENT_READ)
                selector.register(self._wake_read, selectors.EVENT_READ)
                while not self._stop.is_set():
                    for key, _ in selector.select(poll_interval):
                        if key.fileobj is self.socket:
                            self._accept()
                        else:
                            self._wake_read.recv(64)
                    self._close_stale()
            self._drain()
        finally:
            _stop_all(self.loops)
            self._stop.clear()
            self._idle.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (from another thread) and wait until it returned: idle
        connections are closed, requests being served are answered first."""
        self._stop.set()
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass
        self._idle.wait()

    def server_close(self) -> None:
        """Close the listening socket, and every connection still open."""
        self.socket.close()
        self._wake_read.close()
        self._wake_write.close()
        with self._guard:
            left = list(self._slots.open)
        for slot in left:
            _wake(slot.sock)

    def _accept(self) -> None:
        try:
            sock, address = self.socket.accept()
        except OSError:  # the client gave up meanwhile, or no descriptors left
            return
        client = str(address[0]) if isinstance(address, tuple) else ""
        with self._guard:
            admission = self._slots.admit(client, sock, time.monotonic())
        if admission.replaces is not None:
            logger.debug("webhook: %s; closing a spare connection of %s for one from %s",
                        admission.why, admission.replaces.client, client)
            _wake(admission.replaces.sock)
        if admission.slot is None:
            logger.warning("webhook: %s; closing a new one from %s", admission.why, client)
            _cut(sock)
            return
        self.accepted += 1
        threading.Thread(target=self._run, args=(admission.slot, address), daemon=True,
                         name=f"webhook-{client}").start()

    def _close_stale(self) -> None:
        """While the server is more than half full, the connections idle for a few seconds."""
        with self._guard:
            stale = self._slots.stale(time.monotonic())
        for slot in stale:
            _wake(slot.sock)
        if stale:
            logger.info("webhook: more than half full; closed %d idle connections", len(stale))

    def held_by(self, client: str) -> int:
        """Connections the address ``client`` holds now."""
        with self._guard:
            return self._slots.held_by(client)

    @property
    def replaced(self) -> int:
        """Connections closed so far to make room for others, or for idling while busy."""
        return self._slots.replaced

    # -- a connection ----------------------------------------------------------

    def _run(self, slot: Slot, address: Any) -> None:
        try:
            self.handle_connection(slot.sock, address, slot)
        finally:
            with self._guard:
                self._slots.release(slot)
                self._guard.notify_all()

    def handle_connection(self, sock: Any, address: Any, slot: Slot | None = None) -> None:
        """Serve one accepted connection until it ends, then close it (TLS first when the
        server has a context); ``slot`` is its place among the open connections."""
        started = time.monotonic()
        if slot is None:  # served alone, outside the accept loop
            slot = Slot(str(address[0]) if isinstance(address, tuple) else "", sock, started)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                # CPython's TLS calls hold a socket's timeout for the whole call.
                sock.settimeout(min(self.read_timeout, self.request_deadline))
                sock = self.ssl_context.wrap_socket(sock, server_side=True,
                                                    do_handshake_on_connect=False)
                with self._guard:  # made to give way now: shut down the TLS socket itself
                    slot.sock = sock
                    if slot.evicted:
                        raise _Gone("made room for another connection")
                sock.do_handshake()
                slot.authenticated = self.client_auth and bool(sock.getpeercert())
            connection = _Connection(self, sock, slot)
            connection.serve(started + self.request_deadline)
        except (_Gone, OSError, ValueError) as error:  # ssl.SSLError is an OSError
            logger.debug("webhook: connection from %s ended: %s", address, error)
        except Exception:
            logger.exception("webhook: serving the connection from %s failed", address)
        finally:
            _cut(sock)

    def _drain(self) -> None:
        """Close idle connections; wait (up to ``request_deadline``) for busy ones to answer."""
        deadline = time.monotonic() + self.request_deadline
        with self._guard:
            while self._slots.open and time.monotonic() < deadline:
                for slot in self._slots.open:
                    if slot.state != BUSY:
                        _wake(slot.sock)
                self._guard.wait(0.05)


def _stop_all(loops: Sequence[Loop]) -> None:
    """Stop every loop at once. A loop's stop waits for its thread to finish what it is
    doing (a sweep's pass, an informer's event being applied): one after another, those
    waits would add up within a SIGTERM's grace; at once, the longest of them counts."""
    stoppers = [threading.Thread(target=_stop_one, args=(loop,), daemon=True,
                                 name=f"stop-{type(loop).__name__}") for loop in loops]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()


def _stop_one(loop: Loop) -> None:
    try:
        loop.stop()
    except Exception:  # noqa: BLE001 - the other loops stop all the same
        logger.exception("webhook: stopping %s failed", type(loop).__name__)


def _wake(sock: Any, how: int = socket.SHUT_RDWR) -> None:
    """Shut a socket down (both ways: a thread blocked reading it wakes up and closes it).

    The plain socket's shutdown, not SSLSocket's (which drops its TLS state under the
    reading thread); never a close from another thread (the descriptor could be reused)."""
    try:
        socket.socket.shutdown(sock, how)
    except (OSError, TypeError):
        pass


def _cut(sock: Any) -> None:
    """Shut a socket down and close it (its own thread, or one never served)."""
    _wake(sock)
    try:
        sock.close()
    except OSError:
        pass


def server_context(cert_file: str, key_file: str, *,
                   client_ca: str | None = None) -> ssl.SSLContext:
    """TLS 1.2 or later with the serving certificate; with ``client_ca`` (a PEM file of one
    or more CAs), the client must present a certificate one of them signed, or the handshake
    fails: nothing the client sends is read."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as error:
        raise FluenceError(f"webhook certificate {cert_file} with key {key_file} cannot be"
                           f" used: {error}") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as error:
            raise FluenceError(f"FLUENCE_WEBHOOK_CLIENT_CA={client_ca}: no CA certificate can "
                               f"be read from it: {error}") from None
        if not context.get_ca_certs():
            raise FluenceError(f"FLUENCE_WEBHOOK_CLIENT_CA={client_ca}: it holds no CA "
                               f"certificate (a client certificate or key instead?)")
        context.verify_mode = ssl.CERT_REQUIRED
    return context
