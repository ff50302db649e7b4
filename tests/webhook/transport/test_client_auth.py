"""Client-certificate authentication of the API server (issue 32): with
``FLUENCE_WEBHOOK_CLIENT_CA`` set, the admission port serves only clients whose certificate
that CA signed, and refuses the others during the TLS handshake; the report port never asks."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webhook_helpers import pod, review

from fluence_core import names
from fluence_core.errors import FluenceError
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import load_settings
from fluence_core.webhook.transport import tls
from fluence_core.webhook.main import Webhook, make_server
from fluence_core.webhook.transport.server import server_context


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Any]:
    """The webhook's serving certificate, the API server's client certificate and its CA,
    and a client certificate from another CA."""
    return {"serving": tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"]),
            "apiserver": tls.generate_client("kube-apiserver", tmp_path / "apiserver"),
            "stranger": tls.generate_client("kube-apiserver", tmp_path / "stranger"),
            "dir": tmp_path}


@pytest.fixture
def webhook(pki: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Webhook]:
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    settings = load_settings(webhook_cert_dir=pki["dir"] / "tls",
                             webhook_client_ca=pki["apiserver"].ca_file)
    served = make_server(settings, FakeCluster(), host="127.0.0.1", port=0, report_port=0)
    thread = threading.Thread(target=served.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield served
    served.shutdown()
    thread.join(10)
    served.server_close()


def client(pki: dict[str, Any], who: str | None) -> ssl.SSLContext:
    """A client trusting the webhook's CA, presenting ``who``'s certificate (or none)."""
    context = ssl.create_default_context(cadata=pki["serving"].ca_pem.decode())
    if who is not None:
        context.load_cert_chain(str(pki[who].cert_file), str(pki[who].key_file))
    return context


def post(port: int, context: ssl.SSLContext, path: str, body: bytes) -> tuple[int, Any]:
    connection = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        connection.request("POST", path, body=body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_the_api_servers_client_certificate_gets_its_review_answered(
        webhook: Webhook, pki: dict[str, Any]) -> None:
    status, answer = post(webhook.port, client(pki, "apiserver"), "/mutate",
                          json.dumps(review(pod("g-0", group="g"))).encode())
    assert status == 200 and answer["response"]["allowed"] is True


@pytest.mark.parametrize("who", [None, "stranger"])
def test_a_client_without_a_certificate_of_that_ca_is_refused_during_the_handshake(
        webhook: Webhook, pki: dict[str, Any], who: str | None) -> None:
    # TLS 1.3 lets the client finish its side first: the server's refusal (an alert) then
    # arrives as the request is sent or its answer read, never as an HTTP answer.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        post(webhook.port, client(pki, who), "/mutate",
             json.dumps(review(pod("g-0", group="g"))).encode())


def test_the_report_port_asks_no_client_certificate(webhook: Webhook,
                                                    pki: dict[str, Any]) -> None:
    status, answer = post(webhook.report_port, client(pki, None), names.REPORT_PATH,
                          b'{"event": "found"}')
    assert (status, answer["code"]) == (401, 401)  # heard, and refused for its missing token


def test_a_client_ca_file_holding_no_ca_is_named_at_start(pki: dict[str, Any]) -> None:
    serving = pki["serving"]
    with pytest.raises(FluenceError, match="FLUENCE_WEBHOOK_CLIENT_CA=.*client.key"):
        server_context(str(serving.cert_file), str(serving.key_file),
                       client_ca=str(pki["apiserver"].key_file))
    with pytest.raises(FluenceError, match="FLUENCE_WEBHOOK_CLIENT_CA=.*missing"):
        server_context(str(serving.cert_file), str(serving.key_file),
                       client_ca=str(pki["dir"] / "missing.pem"))
