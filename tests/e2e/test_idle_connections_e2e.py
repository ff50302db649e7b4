"""Issue 32, attack 5, on a real kube-apiserver: idle keep-alive connections holding the
webhook's share for the API server's address must not fail pod creates.

The attacker connects from 127.0.0.1, the address the API server calls the webhook from
here (as a pod on a control-plane node's host network could), does one request on each
connection and then keeps it idle. Pods are then created in parallel, so the API server
needs connections beyond the one it pooled: before issue 32's fairness rules, each new one
was closed at accept and the creates failed "failed calling webhook ... EOF".
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import webhook_beside

pytestmark = pytest.mark.e2e
INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE  # a hostile client checks nothing
REVIEW = json.dumps({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {"uid": "idle", "operation": "CREATE", "namespace": "default",
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "object": {"metadata": {"name": "p"}, "spec": {"containers": []}}}}).encode()


def idle_connection(port: int) -> ssl.SSLSocket | None:
    """A keep-alive connection from 127.0.0.1 that was served once and then says nothing."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock = INSECURE.wrap_socket(raw)
        sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                     % len(REVIEW) + REVIEW)
        answer = b""
        while not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            answer += chunk
        return sock
    except (OSError, ssl.SSLError):
        raw.close()
        return None


def grouped_pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {names.GROUP_LABEL: name}},
            "spec": {"schedulerName": names.SCHEDULER_NAME,
                     "containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def attacked(kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[int]:
    settings = load_settings(webhook_config="fluence-idle-connections")
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=kube_namespace) as webhook:
        held = [s for s in (idle_connection(webhook.port)
                            for _ in range(webhook.admission.max_per_client)) if s]
        try:
            yield len(held)
        finally:
            for sock in held:
                sock.close()


def test_pods_created_in_parallel_while_idle_connections_hold_the_address_are_admitted(
        kube: KubeCluster, kube_namespace: str, attacked: int) -> None:
    assert attacked >= 100  # most of the address's share, whatever the API server pooled

    def create(index: int) -> dict[str, object]:
        return kube.create("pods", grouped_pod(f"idle-{index}"), kube_namespace)

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            stored = list(pool.map(create, range(16)))
        assert [p["spec"]["schedulingGroup"] for p in stored] == [  # type: ignore[index]
            {"podGroupName": f"idle-{i}"} for i in range(16)]
    finally:  # Fluence pods left pending would be placed by another test's scheduler
        for index in range(16):
            kube.delete("pods", f"idle-{index}", kube_namespace, grace_period_seconds=0)
