"""The HTTPS server: stdlib ``ThreadingHTTPServer`` + ``ssl``, hardened for the API server.

Why the standard library: the webhook answers small JSON requests from one
client (the API server) and its work is Python anyway; a thread per connection
with keep-alive is plenty (see ``benchmarks/bench_webhook.py``) and adds no
dependency. Hardening:

* the TLS handshake runs in the connection's thread with a timeout, so a client
  that connects and never speaks cannot stall the accept loop;
* every read has a timeout, and a whole request (TLS handshake, or waiting for it,
  request line, headers and body) has a deadline: a client trickling one byte at a
  time (slowloris) is cut off when the deadline passes, however steady its bytes;
  a reaper thread shuts such sockets down, which wakes their blocked reads;
* a keep-alive connection that was served may then sit idle for ``idle_timeout``
  (longer than the 90 s after which the API server's Go transport drops an idle
  connection): the deadline starts at the next request's first byte. Cut at the
  request deadline, idle connections were closed while the API server was
  reusing them, and the pod create failed ("broken pipe", issue 20's benchmark);
* a body must declare its length (no chunked uploads) and may not exceed
  ``max_body`` bytes;
* at most ``max_connections`` connections are served at once, and at most
  ``max_per_client`` from one address, so one client cannot take every slot; more
  are closed at accept;
* every POST gets an AdmissionReview back, whatever the body held, but for the
  scout's reports (``POST /v1/scout-report``, :mod:`~fluence_core.webhook.report`),
  which get JSON, bounded at ``MAX_REPORT`` bytes.

Latency: a response leaves in one write on a socket with ``TCP_NODELAY``. The
standard handler writes the status line and headers, then the body, straight
to the socket; the second small write then waits for the ACK of the first
(Nagle), which the API server delays by up to 40 ms (delayed ACK), on every
keep-alive request (issue 20: 45 ms added to each pod create).
"""

from __future__ import annotations

import io
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Sequence
from typing import Any, Protocol, cast

from fluence_core.errors import FluenceError
from fluence_core.log import logger
from fluence_core import names
from fluence_core.webhook.report import MAX_REPORT, ReportEndpoint
from fluence_core.webhook.review import AdmissionService, deny

MAX_BODY = 4 * 1024 * 1024
"""Bytes: an AdmissionReview carries one pod (etcd caps objects at 1.5 MiB)."""
READ_TIMEOUT = 10.0
"""Seconds a connection may sit idle or take over a handshake or a body."""
REQUEST_DEADLINE = 10.0
"""Seconds from the start of a handshake or of waiting for a request to its last byte read."""
MAX_PER_CLIENT = 128
"""Connections one address may hold at once (the API server keeps a pool of them)."""
IDLE_TIMEOUT = 120.0
"""Seconds a served keep-alive connection may wait for its next request."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses connections
    wbufsize = 64 * 1024  # headers and body leave together, at the flush after each request
    disable_nagle_algorithm = True  # TCP_NODELAY: an answer is never held back for an ACK
    server: "WebhookServer"
    server_version = "fluence-webhook"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("webhook http: " + format, *args)

    def _send(self, status: int, payload: dict[str, Any] | str, *, close: bool = False) -> None:
        if isinstance(payload, str):
            data, kind = payload.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(payload, separators=(",", ":")).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self, status: int, message: str) -> None:
        """An error as an AdmissionReview (a report's as JSON); the connection closes (the body
        may be unread)."""
        if self._is_report():
            self._send(status, {"error": message, "code": status}, close=True)
            return
        self._send(status, deny("", f"fluence webhook: {message}", code=status), close=True)

    def _is_report(self) -> bool:
        return self.path.split("?", 1)[0] == names.REPORT_PATH

    served = False  # a request was answered on this connection

    def handle_one_request(self) -> None:
        if self.served and not self._next_request_begins():
            self.close_connection = True
            return
        self.server.watch(self.connection)
        try:
            super().handle_one_request()
        finally:
            self.server.unwatch(self.connection)
            self.served = True

    def _next_request_begins(self) -> bool:
        """Whether a byte of another request arrives within the idle timeout (False: the
        client closed the connection, or kept it silent for that long)."""
        self.server.watch(self.connection, self.server.idle_timeout)
        self.connection.settimeout(self.server.idle_timeout)
        try:
            reader = cast(io.BufferedReader, self.rfile)  # rbufsize -1: always buffered
            return bool(reader.peek(1))
        except (OSError, ValueError):  # timed out, shut down by the reaper, or reset
            return False
        finally:
            self.connection.settimeout(self.server.read_timeout)

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        if self.path in ("/healthz", "/readyz", "/livez"):
            self._send(200, "ok")
        else:
            self._send(404, "not found")

    def do_POST(self) -> None:  # noqa: N802
        if self.headers.get("Transfer-Encoding"):
            return self._refuse(411, "send the body with a Content-Length, not chunked")
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            return self._refuse(411, "Content-Length is required")
        try:
            length = int(raw_length)
            if length < 0:
                raise ValueError
        except ValueError:
            return self._refuse(400, f"bad Content-Length {raw_length!r}")
        reports = self.server.reports if self._is_report() else None
        if self._is_report() and reports is None:
            return self._refuse(404, "this server takes no scout reports (no cluster connection)")
        limit = MAX_REPORT if reports is not None else self.server.max_body
        if length > limit:
            return self._refuse(413, f"body of {length} bytes exceeds {limit}")
        body = self.rfile.read(length)
        self.server.unwatch(self.connection)  # read in time: the review's own time is ours
        if len(body) != length:
            self.close_connection = True
            return  # the client went away mid-body: nobody to answer
        if reports is not None:
            reply = reports.handle(self.headers.get("Authorization"), body)
            return self._send(reply.status, reply.body)
        outcome = self.server.service.review(body)
        self._send(outcome.status, outcome.body)

    def do_PUT(self) -> None:  # noqa: N802
        self._refuse(405, "only POST carries an AdmissionReview")

    do_DELETE = do_PATCH = do_PUT  # noqa: N815


class Loop(Protocol):
    """A periodic task of the webhook process (the orphan sweep), run while the server serves."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class WebhookServer(ThreadingHTTPServer):
    """One thread per connection; TLS when ``ssl_context`` is given; ``loops`` start with
    :meth:`serve_forever` and stop when it returns."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], service: AdmissionService, *,
                 ssl_context: ssl.SSLContext | None = None, max_body: int = MAX_BODY,
                 timeout: float = READ_TIMEOUT, max_connections: int = 512,
                 max_per_client: int = MAX_PER_CLIENT,
                 request_deadline: float = REQUEST_DEADLINE,
                 idle_timeout: float = IDLE_TIMEOUT,
                 reports: ReportEndpoint | None = None, loops: Sequence[Loop] = ()) -> None:
        self.service = service
        self.loops = tuple(loops)
        self.idle_timeout = idle_timeout
        self.reports = reports
        self.ssl_context = ssl_context
        self.max_body = max_body
        self.read_timeout = timeout
        self.max_per_client = max_per_client
        self.request_deadline = request_deadline
        self._slots = threading.BoundedSemaphore(max_connections)
        self._guard = threading.Lock()
        self._per_client: dict[str, int] = {}
        self._deadlines: dict[socket.socket, float] = {}
        self._closed = threading.Event()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        threading.Thread(target=self._reap, daemon=True, name="webhook-deadlines").start()

    # -- deadlines -----------------------------------------------------------

    def watch(self, connection: socket.socket, seconds: float | None = None) -> None:
        """From now, ``connection`` has ``seconds`` (``request_deadline``) to deliver a
        request."""
        with self._guard:
            self._deadlines[connection] = time.monotonic() + (
                self.request_deadline if seconds is None else seconds)

    def unwatch(self, connection: socket.socket) -> None:
        with self._guard:
            self._deadlines.pop(connection, None)

    def _reap(self) -> None:
        """Shut down every connection past its deadline; its blocked read then returns."""
        tick = max(0.05, min(0.5, self.request_deadline / 4, self.idle_timeout / 4))
        while not self._closed.wait(tick):
            now = time.monotonic()
            with self._guard:
                late = [c for c, deadline in self._deadlines.items() if deadline <= now]
                for connection in late:
                    del self._deadlines[connection]
            for connection in late:
                logger.debug("webhook: a request missed its %.0f s deadline; closing it",
                             self.request_deadline)
                try:  # the plain socket's shutdown, not SSLSocket's (another thread reads it)
                    socket.socket.shutdown(connection, socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        for loop in self.loops:
            loop.start()
        try:
            super().serve_forever(poll_interval)
        finally:
            for loop in self.loops:
                loop.stop()

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0]) if isinstance(client_address, tuple) else ""
        with self._guard:
            crowded = self._per_client.get(client, 0) >= self.max_per_client
            if not crowded:
                self._per_client[client] = self._per_client.get(client, 0) + 1
        if crowded:
            logger.warning("webhook: %s holds %d connections already; closing a new one",
                           client, self.max_per_client)
            self.shutdown_request(request)
            return
        if not self._slots.acquire(blocking=False):
            self._leave(client)
            logger.warning("webhook: too many connections; closing one from %s", client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            self._leave(client)
            raise

    def held_by(self, client: str) -> int:
        """Connections the address ``client`` holds now."""
        with self._guard:
            return self._per_client.get(client, 0)

    def _leave(self, client: str) -> None:
        with self._guard:
            left = self._per_client.get(client, 1) - 1
            if left > 0:
                self._per_client[client] = left
            else:
                self._per_client.pop(client, None)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0]) if isinstance(client_address, tuple) else ""
        try:
            request.settimeout(self.read_timeout)
            if self.ssl_context is not None:
                try:
                    request = self.ssl_context.wrap_socket(request, server_side=True,
                                                           do_handshake_on_connect=False)
                    self.watch(request)
                    request.do_handshake()
                    self.unwatch(request)
                except (OSError, ssl.SSLError, ValueError) as error:
                    self.unwatch(request)
                    logger.debug("webhook: TLS handshake with %s failed: %s", client_address, error)
                    self.shutdown_request(request)
                    return
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()
            self._leave(client)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug(
            "webhook: connection from %s ended with an error", client_address, exc_info=True
        )


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as error:
        raise FluenceError(f"webhook certificate {cert_file} with key {key_file} cannot be"
                           f" used: {error}") from None
    return context
