"""Issue 32, attack 5 ("starve the webhook"): idle keep-alive connections held by one
address, or by a few, must not keep the API server's next connection out.

Each attacking connection does what a keep-alive client does: a TLS handshake, one
request answered, then silence. Attackers connect from 127.0.0.1 (the API server's own
address, as a pod on the host network could) or from 127.0.0.2-5 (Linux answers on the
whole loopback range); the API server is a client from 127.0.0.1 opening a new
connection, as its pool does once a pooled connection expired.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fluence_core.settings import Settings
from fluence_core.testing_apiserver import wait_for
from fluence_core.webhook.transport import tls
from fluence_core.webhook.transport.fairness import PENDING_GRACE
from fluence_core.webhook.admission.review import AdmissionEndpoint, AdmissionService
from fluence_core.webhook.transport.server import WebhookServer, server_context
from tests.raw_tls import REVIEW, idle_connection, loopback_alias_works

pytestmark = pytest.mark.skipif(not loopback_alias_works("127.0.0.5"),
                                reason="cannot bind 127.0.0.2-5 (not Linux loopback)")


class Served:
    def __init__(self, tmp_path: Path, **limits: Any) -> None:
        self.cert = tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"])
        self.server = WebhookServer(
            ("127.0.0.1", 0), AdmissionEndpoint(AdmissionService(Settings(), [])),
            ssl_context=server_context(str(self.cert.cert_file), str(self.cert.key_file)),
            **limits)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        self.context = ssl.create_default_context(cadata=self.cert.ca_pem.decode())
        self.held: list[ssl.SSLSocket] = []

    def idle_connection(self, source: str) -> bool:
        """One keep-alive connection from ``source``: handshake, one request answered, then
        nothing. Whether the server took it."""
        sock = idle_connection(self.server.port, self.context, source=source)
        if sock is None:
            return False
        self.held.append(sock)
        return True

    def api_server_review(self) -> dict[str, Any]:
        """The API server's new connection from 127.0.0.1, and its review's answer."""
        connection = http.client.HTTPSConnection("localhost", self.server.port,
                                                 context=self.context, timeout=10)
        try:
            connection.request("POST", "/mutate", body=REVIEW)
            response = connection.getresponse()
            assert response.status == 200
            return json.loads(response.read())  # type: ignore[no-any-return]
        finally:
            connection.close()

    def close(self) -> None:
        for sock in self.held:
            sock.close()
        self.server.shutdown()
        self.thread.join(10)
        self.server.server_close()


@pytest.fixture
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    each = Served(tmp_path, **getattr(request, "param", {}))
    yield each
    each.close()


def test_a_full_share_of_idle_connections_from_its_address_leaves_the_api_server_served(
        served: Served) -> None:
    # The per-address share as shipped (128), all idle, from the API server's own address.
    limit = served.server.max_per_client
    opened = sum(served.idle_connection("127.0.0.1") for _ in range(limit))
    assert opened == limit
    assert served.server.held_by("127.0.0.1") == limit
    answer = served.api_server_review()
    assert answer["response"]["uid"] == "u" and answer["response"]["allowed"] is True
    assert served.server.held_by("127.0.0.1") <= limit


@pytest.mark.parametrize("served", [{"max_connections": 32, "max_per_client": 8}],
                         indirect=True)
def test_four_addresses_filling_every_slot_with_idle_connections_leave_the_api_server_served(
        served: Served) -> None:
    # As in the issue (4 x 128 of 512), at a scale of 4 x 8 of 32.
    for attacker in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"):
        for _ in range(served.server.max_per_client):
            served.idle_connection(attacker)
    attackers = sum(served.server.held_by(f"127.0.0.{n}") for n in (2, 3, 4, 5))
    assert attackers >= served.server.max_connections * 3 // 4
    for _ in range(3):  # the API server's pool: one new connection after another
        answer = served.api_server_review()
        assert answer["response"]["allowed"] is True


def test_with_a_client_ca_silent_connections_from_its_address_leave_the_api_server_served(
        tmp_path: Path) -> None:
    # The attacker shares the API server's address and cannot finish a handshake without the
    # certificate: it holds the address's whole share with connections that never speak.
    client = tls.generate_client("kube-apiserver", tmp_path / "client")
    cert = tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"])
    server = WebhookServer(
        ("127.0.0.1", 0), AdmissionEndpoint(AdmissionService(Settings(), [])),
        max_per_client=16,
        ssl_context=server_context(str(cert.cert_file), str(cert.key_file),
                                   client_ca=str(client.ca_file)))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
              for _ in range(16)]
    try:
        wait_for(lambda: server.held_by("127.0.0.1") == 16, "the silent connections taken")
        time.sleep(PENDING_GRACE)  # what the rule waits for: a handshake that never came
        context = ssl.create_default_context(cadata=cert.ca_pem.decode())
        context.load_cert_chain(str(client.cert_file), str(client.key_file))
        connection = http.client.HTTPSConnection("localhost", server.port, context=context,
                                                 timeout=10)
        connection.request("POST", "/mutate", body=REVIEW)
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["response"]["allowed"]
        # Its connection, certified, stays while it idles; a silent one gave way for it.
        assert server.held_by("127.0.0.1") == 16 and server.replaced >= 1
        connection.close()
    finally:
        for sock in silent:
            sock.close()
        server.shutdown()
        thread.join(10)
        server.server_close()


@pytest.mark.parametrize("served", [{"max_connections": 8, "busy_idle_timeout": 0.3}],
                         indirect=True)
def test_while_more_than_half_full_idle_connections_are_closed_after_a_short_wait(
        served: Served) -> None:
    assert all(served.idle_connection("127.0.0.2") for _ in range(5))
    wait_for(lambda: served.server.held_by("127.0.0.2") <= 4,
             "idle connections closed until the server is at most half full", timeout=10)
    assert served.api_server_review()["response"]["allowed"] is True
