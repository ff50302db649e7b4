"""Raw TLS connections to a webhook server, from a chosen loopback address: what the
connection attacks open (``tests/hostile/test_idle_connections.py``,
``tests/webhook/transport/test_slowloris.py``, ``tests/e2e/test_idle_connections_e2e.py``).

Linux answers on all of 127.0.0.0/8, so a test binds its attackers to 127.0.0.2 and up
and keeps 127.0.0.1 for the API server's own connections, as the webhook's per-client
fairness rules tell clients apart by address.
"""

from __future__ import annotations

import json
import socket
import ssl

REVIEW = json.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "u", "operation": "CREATE", "namespace": "default",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "object": {"metadata": {"name": "p"}, "spec": {"containers": []}}}}).encode()
"""A review of a pod no handler touches: answered ``allowed`` at once."""


def loopback_alias_works(address: str) -> bool:
    """Whether this machine lets a socket bind ``address`` (127.0.0.2 and up: Linux)."""
    probe = socket.socket()
    try:
        probe.bind((address, 0))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def insecure_context() -> ssl.SSLContext:
    """A client that checks nothing, as an attacker's does."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def tls_connection(port: int, context: ssl.SSLContext, *, source: str = "127.0.0.1",
                   timeout: float = 10.0) -> ssl.SSLSocket:
    """A connection from ``source`` to the server on 127.0.0.1:``port``, handshake done.
    Raises :class:`OSError` (:class:`ssl.SSLError` is one) when the server refuses or
    drops it, the socket closed."""
    raw = socket.socket()
    raw.settimeout(timeout)
    try:
        raw.bind((source, 0))
        raw.connect(("127.0.0.1", port))
        hostname = "localhost" if context.check_hostname else None
        return context.wrap_socket(raw, server_hostname=hostname)
    except OSError:
        raw.close()
        raise


def idle_connection(port: int, context: ssl.SSLContext, *,
                    source: str = "127.0.0.1") -> ssl.SSLSocket | None:
    """A keep-alive connection from ``source`` that was served one review (:data:`REVIEW`)
    and then says nothing; None when the server did not take it or dropped it."""
    try:
        sock = tls_connection(port, context, source=source)
    except OSError:
        return None
    try:
        sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                     % len(REVIEW) + REVIEW)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            answer += chunk
    except OSError:
        sock.close()
        return None
    return sock
