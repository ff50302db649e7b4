"""Issue 32, small things: a 5,000-digit Content-Length dropped the connection with no
answer, and a 400 reply leaked Python's "use sys.set_int_max_str_digits()"."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import Settings
from fluence_core.hybrid.endpoint import ReportEndpoint
from fluence_core.webhook.admission.review import AdmissionEndpoint, AdmissionService
from fluence_core.webhook.transport.routes import Routes
from fluence_core.webhook.transport.server import WebhookServer


@pytest.fixture
def servers() -> Iterator[dict[str, WebhookServer]]:
    """The admission server and the report server, as ``fluence webhook`` runs them."""
    cluster = FakeCluster()
    settings = Settings()
    served = {"/mutate": WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(
                  AdmissionService(settings, [], cluster=cluster))),
              names.REPORT_PATH: WebhookServer(("127.0.0.1", 0),
                                               Routes([ReportEndpoint(cluster, settings)]))}
    for each in served.values():
        threading.Thread(target=each.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
    yield served
    for each in served.values():
        each.shutdown()
        each.server_close()


def _exchange(server: WebhookServer, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


@pytest.mark.parametrize("path", ["/mutate", names.REPORT_PATH])
def test_a_five_thousand_digit_content_length_is_answered_413(
        servers: dict[str, WebhookServer], path: str) -> None:
    answer = _exchange(servers[path], f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: "
                               f"{'9' * 5000}\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"set_int_max_str_digits" not in answer


def test_a_report_with_a_five_thousand_digit_number_is_refused_without_pythons_words(
        servers: dict[str, WebhookServer]) -> None:
    body = ('{"event": "release", "position": ' + "9" * 5000 + "}").encode()
    answer = _exchange(servers[names.REPORT_PATH],
                       b"POST " + names.REPORT_PATH.encode() + b" HTTP/1.1\r\n"
                       b"Host: x\r\nAuthorization: Bearer t\r\nConnection: close\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    payload = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    assert payload["error"] == "bad report: a number in it is too long"
