"""Issue 32, attack 5, on a real kube-apiserver: idle keep-alive connections holding the
webhook's share for the API server's address must not fail pod creates.

The attacker connects from 127.0.0.1, the address the API server calls the webhook from
here (as a pod on a control-plane node's host network could), does one request on each
connection and then keeps it idle. Pods are then created in parallel, so the API server
needs connections beyond the one it pooled: before issue 32's fairness rules, each new one
was closed at accept and the creates failed "failed calling webhook ... EOF".
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from fluence_core.testing_apiserver import webhook_beside
from tests.raw_tls import idle_connection, insecure_context

pytestmark = pytest.mark.e2e
INSECURE = insecure_context()  # a hostile client checks nothing


def grouped_pod(name: str) -> dict[str, object]:
    """A pod of a group of its own: the webhook is sent it."""
    return make_pod_dict(name, None, namespace=None, labels={names.GROUP_LABEL: name})


@pytest.fixture
def attacked(kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> Iterator[int]:
    settings = load_settings(webhook_config="fluence-idle-connections")
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=kube_namespace) as webhook:
        held = [s for s in (idle_connection(webhook.port, INSECURE)
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
