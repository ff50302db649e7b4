"""The HTTPS server: TLS bootstrap with a generated CA, hardening, fuzzing."""

from __future__ import annotations

import http.client
import json
import random
import socket
import ssl
import threading
import time

import pytest
from webhook_helpers import decode_patch, pod, review

from fluence_core.webhook.transport import tls
from fluence_core.webhook.admission.handlers.gang import GangHandler
from fluence_core.webhook.admission.review import AdmissionEndpoint, AdmissionService
from fluence_core.webhook.transport.server import WebhookServer, server_context


@pytest.fixture
def served(tmp_path, settings, cluster):
    """A webhook on 127.0.0.1 with a certificate from a freshly generated CA."""
    cert = tls.generate(["localhost"], tmp_path, ip_addresses=["127.0.0.1"])
    service = AdmissionService(settings, [GangHandler()], cluster=cluster)
    server = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(service), max_body=64 * 1024,
                           timeout=1.0,
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    client_ctx = ssl.create_default_context(cadata=cert.ca_pem.decode())
    yield server, client_ctx
    server.shutdown()
    server.server_close()


def post(server, ctx, body: bytes, headers=None):
    conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=5)
    conn.request("POST", "/mutate", body=body, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def test_a_real_https_request_verified_with_the_generated_ca_is_mutated_and_makes_nothing(
        served, cluster):
    server, ctx = served
    status, data = post(server, ctx, json.dumps(review(pod("g-0", group="g"))).encode())
    assert status == 200
    response = json.loads(data)["response"]
    assert response["allowed"] and decode_patch(response)[0]["value"] == {"podGroupName": "g"}
    assert cluster.get("podgroups", "g", "default") is None  # the stored pod's, not the review's


def test_a_client_trusting_another_ca_is_refused_by_tls(served, tmp_path):
    server, _ = served
    other = tls.generate(["localhost"], tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        post(server, ssl.create_default_context(cadata=other.ca_pem.decode()), b"{}")


def test_the_serving_certificate_names_the_service(tmp_path):
    from cryptography import x509

    names = tls.service_dns_names("fluence-webhook", "fluence-system")
    cert = tls.generate(names, tmp_path)
    loaded = x509.load_pem_x509_certificate(cert.cert_file.read_bytes())
    san = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "fluence-webhook.fluence-system.svc" in san.get_values_for_type(x509.DNSName)
    assert oct(cert.key_file.stat().st_mode & 0o777) == "0o600"


def test_bootstrap_patches_the_ca_bundle_of_every_webhook(settings, cluster):
    cluster.create(
        "mutatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": settings.webhook.config},
            "webhooks": [
                {
                    "name": f"w{i}.fluence.flux-framework.org",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "clientConfig": {
                        "service": {"name": "fluence-webhook", "namespace": "fluence-system"}
                    },
                }
                for i in range(2)
            ],
        },
    )
    cert = tls.bootstrap(settings, cluster)
    config = cluster.get("mutatingwebhookconfigurations", settings.webhook.config)
    import base64

    assert [base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"]] == [
        cert.ca_pem
    ] * 2


def test_a_mounted_certificate_is_used_as_is(settings, tmp_path):
    made = tls.generate(["x"], tmp_path)
    cert = tls.bootstrap(settings.replaced(webhook_cert_dir=tmp_path), None)
    assert cert.cert_file == made.cert_file and cert.ca_pem == made.ca_pem


def test_an_oversized_body_is_answered_413_without_reading_it(served):
    server, ctx = served
    conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=5)
    conn.putrequest("POST", "/mutate")
    conn.putheader("Content-Length", str(server.max_body + 1))
    conn.endheaders()  # and no body: the answer must not wait for it
    response = conn.getresponse()
    assert response.status == 413 and json.loads(response.read())["kind"] == "AdmissionReview"


def test_a_silent_client_does_not_block_others(served):
    server, ctx = served
    idle = socket.create_connection(("127.0.0.1", server.port))  # never handshakes
    started = time.monotonic()
    status, _ = post(server, ctx, json.dumps(review(pod("p"))).encode())
    assert status == 200 and time.monotonic() - started < 1.0
    idle.close()


def test_fuzzed_bodies_are_all_answered_with_an_admission_review(served):
    server, ctx = served
    rng = random.Random(5)
    valid = json.dumps(review(pod("p", group="g"))).encode()
    bodies = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300))) for _ in range(40)]
    for _ in range(40):  # valid JSON, mangled: truncated, spliced, bytes flipped
        cut = rng.randrange(len(valid))
        mangled = bytearray(valid[:cut] + valid[cut + rng.randrange(5):])
        for _ in range(rng.randrange(3)):
            mangled[rng.randrange(len(mangled))] = rng.getrandbits(8)
        bodies.append(bytes(mangled))
    conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=5)
    for body in bodies:
        conn.request("POST", "/mutate", body=body)
        response = conn.getresponse()
        answer = json.loads(response.read())
        assert response.status in (200, 400)
        assert answer["kind"] == "AdmissionReview" and "allowed" in answer["response"]
    conn.close()


def test_a_body_without_a_length_is_refused(served):
    server, ctx = served
    conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=5)
    conn.putrequest("POST", "/mutate")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 411 and json.loads(response.read())["response"]["allowed"] is False


class _Connection:
    """Just enough of a plain socket for the server: one request in, every write recorded."""

    def __init__(self, request: bytes) -> None:
        self.unread = [request]
        self.writes: list[bytes] = []
        self.options: dict[tuple[int, int], int] = {}

    def recv(self, size: int) -> bytes:
        return self.unread.pop(0) if self.unread else b""

    def sendall(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options[(level, option)] = value

    def settimeout(self, value) -> None:
        pass

    def close(self) -> None:
        pass


def test_an_answer_leaves_in_one_write_on_a_socket_without_nagle(settings, cluster):
    # Two writes (headers, then body) meet delayed ACKs: 40 ms per request (issue 20).
    body = json.dumps(review(pod("g-0", group="g"))).encode()
    request = (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
    server = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(
        AdmissionService(settings, [GangHandler()], cluster=cluster)))
    try:
        connection = _Connection(request)
        server.handle_connection(connection, ("127.0.0.1", 1))
    finally:
        server.server_close()
    assert connection.options[(socket.IPPROTO_TCP, socket.TCP_NODELAY)] == 1
    assert len(connection.writes) == 1
    head, _, answer = connection.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and json.loads(answer)["response"]["allowed"]


@pytest.fixture
def keep_alive(tmp_path, settings, cluster):
    """A webhook whose request deadline (1 s) is shorter than its idle timeout (2.5 s).

    The two tests below wait out these durations on real sockets: they are the behaviour
    under test, so they are kept as short as a loaded machine allows (a 1 s margin each)."""
    cert = tls.generate(["localhost"], tmp_path, ip_addresses=["127.0.0.1"])
    server = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(
                               AdmissionService(settings, [GangHandler()], cluster=cluster)),
                           timeout=1.0, request_deadline=1.0, idle_timeout=2.5,
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield server, ssl.create_default_context(cadata=cert.ca_pem.decode())
    server.shutdown()
    server.server_close()


def _ask(conn: http.client.HTTPSConnection, name: str) -> int:
    conn.request("POST", "/mutate", body=json.dumps(review(pod(name))).encode())
    response = conn.getresponse()
    response.read()
    return response.status


def test_a_served_connection_idle_past_the_request_deadline_is_still_reused(keep_alive):
    # The API server keeps its connections for reuse; closing them under it failed creates.
    server, ctx = keep_alive
    conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=5)
    assert _ask(conn, "p-0") == 200
    first = conn.sock
    time.sleep(1.5)  # idle past the request deadline and the read timeout, not the idle one
    assert _ask(conn, "p-1") == 200
    assert conn.sock is first, "answered on the same connection, not a new one"
    conn.close()


def test_a_served_connection_idle_past_the_idle_timeout_is_closed(keep_alive):
    server, ctx = keep_alive
    conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=10)
    assert _ask(conn, "p-0") == 200
    started = time.monotonic()
    assert conn.sock.recv(1) == b"", "the server closed it"
    assert 2.0 < time.monotonic() - started < 6.5
    conn.close()


def _raw(server, ctx) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return ctx.wrap_socket(sock, server_hostname="localhost")


def _read_answer(sock: ssl.SSLSocket) -> tuple[bytes, dict]:
    """One response from a raw socket: its head and its JSON body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head, json.loads(rest[:length])


@pytest.mark.parametrize("request_head, status", [
    (b"POST /mutate HTTP/1.1\r\nthis is no header\r\n\r\n", 400),
    (b"POST /mutate HTTP/1.1\r\nX: " + b"y" * 70_000 + b"\r\n\r\n", 431),
    (b"BREW /mutate HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 405),
    (b"POST /mutate HTTP/3\r\nContent-Length: 2\r\n\r\n{}", 505),
])
def test_a_request_the_parser_refuses_gets_an_admission_review_and_a_close(
        served, request_head, status):
    server, ctx = served
    sock = _raw(server, ctx)
    sock.sendall(request_head)
    head, answer = _read_answer(sock)
    assert head.startswith(b"HTTP/1.1 %d" % status) and b"Connection: close" in head
    assert answer["kind"] == "AdmissionReview" and answer["response"]["allowed"] is False
    assert sock.recv(1) == b"", "the server closed it"
    sock.close()


def test_pipelined_requests_are_answered_in_order_on_one_connection(served):
    server, ctx = served
    bodies = [json.dumps(review(pod(f"p-{i}"), uid=f"u{i}")).encode() for i in range(3)]
    sock = _raw(server, ctx)
    sock.sendall(b"".join(b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s"
                          % (len(body), body) for body in bodies))
    uids = [_read_answer(sock)[1]["response"]["uid"] for _ in bodies]
    assert uids == ["u0", "u1", "u2"]
    sock.close()


def test_expect_100_continue_is_answered_before_the_body_is_sent(served):
    server, ctx = served
    body = json.dumps(review(pod("p"))).encode()
    sock = _raw(server, ctx)
    sock.sendall(b"POST /mutate HTTP/1.1\r\nExpect: 100-continue\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body))
    assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
    sock.sendall(body)
    head, answer = _read_answer(sock)
    assert head.startswith(b"HTTP/1.1 200") and answer["response"]["allowed"] is True
    sock.close()


class _Held:
    """A service whose reviews wait until released: a request in flight at shutdown."""

    writer = None

    def __init__(self, inner: AdmissionService) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.release = threading.Event()

    def review(self, body: bytes):
        self.entered.set()
        self.release.wait(10)
        return self.inner.review(body)


def test_shutdown_closes_idle_connections_and_answers_the_request_in_flight(
        tmp_path, settings, cluster):
    cert = tls.generate(["localhost"], tmp_path, ip_addresses=["127.0.0.1"])
    service = _Held(AdmissionService(settings, [GangHandler()], cluster=cluster))
    server = WebhookServer(("127.0.0.1", 0), AdmissionEndpoint(service),  # type: ignore[arg-type]
                           ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    serving.start()
    ctx = ssl.create_default_context(cadata=cert.ca_pem.decode())
    body = json.dumps(review(pod("p"))).encode()
    request = b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    idle = _raw(server, ctx)
    service.release.set()
    idle.sendall(request)
    assert _read_answer(idle)[1]["response"]["allowed"]  # served, now idle on keep-alive
    service.release.clear()
    service.entered.clear()
    busy = _raw(server, ctx)
    busy.sendall(request)
    assert service.entered.wait(5)
    stopping = threading.Thread(target=server.shutdown)
    stopping.start()
    assert idle.recv(1) == b"", "the idle keep-alive connection is closed at shutdown"
    assert stopping.is_alive(), "shutdown waits for the request in flight"
    service.release.set()
    head, answer = _read_answer(busy)
    assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" in head
    assert answer["response"]["allowed"]
    stopping.join(5)
    serving.join(5)
    assert not stopping.is_alive() and not serving.is_alive()
    server.server_close()
    idle.close()
    busy.close()
