"""Issue 32, on a real kube-apiserver: with ``FLUENCE_WEBHOOK_CLIENT_CA`` set, the API server,
given the client certificate by its AdmissionConfiguration (docs/webhook-client-auth.md),
still gets its pods admitted through the webhook, while a direct POST without that
certificate is refused during the TLS handshake.

The API server reads its admission configuration at start, so this module starts one of
its own, after the webhook is listening: the kubeconfig's user is named after the webhook's
URL, ``127.0.0.1:<port>``, as the docs say for a webhook reached by URL.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from fluence_core import names
from fluence_core.kube.api import MUTATING_WEBHOOKS
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from fluence_core.testing_apiserver import (
    ensure_namespace,
    find_assets,
    start_apiserver,
    wait_in_force,
    webhook_entry,
    webhook_name,
)
from fluence_core.webhook.transport import tls
from fluence_core.webhook.main import Webhook, make_server

pytestmark = pytest.mark.e2e
NAMESPACE = "client-auth"


@dataclass
class Setup:
    kube: KubeCluster
    webhook: Webhook
    serving: tls.ServingCert
    apiserver_client: tls.ClientCert
    stranger: tls.ClientCert


def admission_config(workdir: Path, port: int, client: tls.ClientCert) -> Path:
    """The API server's side, as docs/webhook-client-auth.md writes it."""
    kubeconfig = workdir / "webhook-kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": f"127.0.0.1:{port}",
                   "user": {"client-certificate": str(client.cert_file),
                            "client-key": str(client.key_file)}}]}))
    config = workdir / "admission.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": "MutatingAdmissionWebhook", "configuration": {
            "apiVersion": "apiserver.config.k8s.io/v1",
            "kind": "WebhookAdmissionConfiguration", "kubeConfigFile": str(kubeconfig)}}]}))
    return config


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("client-auth")
    serving = tls.generate(["localhost"], work / "tls", ip_addresses=["127.0.0.1"])
    apiserver_client = tls.generate_client("kube-apiserver", work / "apiserver-client")
    stranger = tls.generate_client("kube-apiserver", work / "stranger")
    settings = load_settings(webhook_cert_dir=work / "tls",
                             webhook_client_ca=apiserver_client.ca_file,
                             webhook_config="fluence-client-auth")
    # No cluster connection: admission alone (the gang handler's patch shows the pod went
    # through the webhook); listening before the API server starts, which names its port.
    webhook = make_server(settings, None, host="127.0.0.1", port=0, report_port=0)
    thread = threading.Thread(target=webhook.serve_forever, args=(0.1,), daemon=True)
    thread.start()
    config = admission_config(work, webhook.port, apiserver_client)
    try:
        with start_apiserver(assets, work / "apiserver",
                             apiserver_flags=[f"--admission-control-config-file={config}"]
                             ) as server:
            kube = server.cluster(qps=1000, burst=1000)
            ensure_namespace(kube, NAMESPACE)
            kube.create(MUTATING_WEBHOOKS, {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": settings.webhook.config},
                "webhooks": [webhook_entry("pods", f"https://127.0.0.1:{webhook.port}/mutate",
                                           NAMESPACE, ca_pem=serving.ca_pem)]})
            wait_in_force(kube, NAMESPACE, webhook_name("pods"))  # the API server calls it
            yield Setup(kube, webhook, serving, apiserver_client, stranger)
            kube.close()
    finally:
        webhook.shutdown()
        thread.join(10)
        webhook.server_close()


def grouped_pod(name: str) -> dict[str, object]:
    """A pod of a group of its own: the webhook is sent it."""
    return make_pod_dict(name, None, namespace=None, labels={names.GROUP_LABEL: name})


def direct_post(setup: Setup, client: tls.ClientCert | None) -> int:
    """A POST of a review straight to the admission port, as a tenant would send it."""
    context = ssl.create_default_context(cadata=setup.serving.ca_pem.decode())
    if client is not None:
        context.load_cert_chain(str(client.cert_file), str(client.key_file))
    connection = http.client.HTTPSConnection("127.0.0.1", setup.webhook.port,
                                             context=context, timeout=30)
    try:
        connection.request("POST", "/mutate", body=json.dumps({}).encode())
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_pod_created_through_the_api_server_passes_through_the_webhook(setup: Setup) -> None:
    stored = setup.kube.create("pods", grouped_pod("through"), NAMESPACE)
    assert stored["spec"]["schedulingGroup"] == {"podGroupName": "through"}


@pytest.mark.parametrize("who", ["no certificate", "a certificate of another CA"])
def test_a_direct_post_without_the_api_servers_certificate_is_refused_at_tls(
        setup: Setup, who: str) -> None:
    client = None if who == "no certificate" else setup.stranger
    with pytest.raises((ssl.SSLError, ConnectionError)):
        direct_post(setup, client)
    # ... and the API server's own certificate is served (so the refusal was the
    # certificate's, not the port's).
    assert direct_post(setup, setup.apiserver_client) in (200, 400)
