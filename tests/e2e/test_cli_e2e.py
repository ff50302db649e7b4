"""``fluence up`` and ``fluence status`` as processes against a real kube-apiserver.

Two ``fluence up`` replicas share one Lease: only the holder schedules. The
test then reads the metrics endpoint and ``fluence status``' tables. A leader stopped
by SIGTERM releases the Lease, and the other replica takes it at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import ApiServer, free_port, stop_process

pytestmark = pytest.mark.e2e


def _fluence(*args: str) -> list[str]:
    return [sys.executable, "-c", "from fluence_core.cli import main; main()", *args]


@pytest.fixture
def env(apiserver: ApiServer, kube_namespace: str) -> dict[str, str]:
    environ = dict(os.environ)
    environ.update({
        "KUBECONFIG": str(apiserver.kubeconfig()),
        "FLUENCE_LEASE_NAMESPACE": kube_namespace,
        "FLUENCE_LEASE_DURATION": "4",
        "FLUENCE_LEASE_RENEW": "1",
    })
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    return environ


@pytest.fixture
def node(kube: KubeCluster, kube_namespace: str) -> Iterator[str]:
    name = f"{kube_namespace}-cli"
    kube.create("nodes", make_node_dict(name, 4, labels={"e2e-ns": kube_namespace},
                                        capacity=True))
    yield name
    kube.delete("nodes", name)


def _replica(env: dict[str, str], name: str, port: int, logs: Path) -> subprocess.Popen[bytes]:
    environ = dict(env, POD_NAME=name, FLUENCE_METRICS_PORT=str(port))
    return subprocess.Popen(_fluence("up"), env=environ, stdout=subprocess.DEVNULL,
                            stderr=open(logs / f"{name}.log", "wb"))


def test_one_replica_leads_schedules_and_reports(kube: KubeCluster, kube_namespace: str, node: str,
                                                env: dict[str, str], tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    replicas = [_replica(env, f"replica-{i}", ports[i], tmp_path) for i in range(2)]
    try:
        deadline = time.monotonic() + 30
        lease = None
        while time.monotonic() < deadline:
            lease = kube.get("leases", "fluence-scheduler", kube_namespace)
            if lease and lease["spec"].get("holderIdentity"):
                break
            time.sleep(0.3)
        assert lease is not None, (tmp_path / "replica-0.log").read_text()[-2000:]
        leader = lease["spec"]["holderIdentity"]
        kube.create("pods", make_pod_dict("via-cli", "3", namespace=None,
                                          nodeSelector={"e2e-ns": kube_namespace}),
                    kube_namespace)
        while time.monotonic() < deadline + 30:
            if kube.get("pods", "via-cli", kube_namespace)["spec"].get("nodeName"):
                break
            time.sleep(0.3)
        assert kube.get("pods", "via-cli", kube_namespace)["spec"]["nodeName"] == node
        assert (
            kube.get("leases", "fluence-scheduler", kube_namespace)["spec"]["holderIdentity"]
            == leader
        )
        port = ports[int(leader.rsplit("-", 1)[1])]
        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        )
        assert 'fluence_scheduling_attempts_total{result="scheduled"}' in metrics
        status = subprocess.run(_fluence("status"), env=dict(env, COLUMNS="200"),
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "via-cli" in status.stdout
        assert node in status.stdout
    finally:
        for replica in replicas:
            replica.terminate()  # both at once: the second need not wait for the first
        for replica in replicas:
            stop_process(replica)


def _holder(kube: KubeCluster, namespace: str) -> str | None:
    lease = kube.get("leases", "fluence-scheduler", namespace)
    return (lease or {}).get("spec", {}).get("holderIdentity") or None


def test_a_leader_stopped_by_sigterm_hands_its_lease_over_at_once(
    kube: KubeCluster, kube_namespace: str, env: dict[str, str], tmp_path: Path,
) -> None:
    """A 60-second Lease: without a release the follower waits a minute (a rolling update
    with no scheduler); released, it takes over within a few of its 1-second attempts."""
    env = dict(env, FLUENCE_LEASE_DURATION="60", FLUENCE_LEASE_RENEW="1")
    replicas = {f"replica-{i}": _replica(env, f"replica-{i}", free_port(), tmp_path)
                for i in range(2)}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _holder(kube, kube_namespace) is None:
            time.sleep(0.2)
        leader = _holder(kube, kube_namespace)
        assert leader in replicas, (tmp_path / "replica-0.log").read_text()[-2000:]
        follower = next(name for name in replicas if name != leader)
        replicas[leader].terminate()  # SIGTERM, as the kubelet sends in a rolling update
        assert replicas[leader].wait(timeout=45) == 0
        stopped = time.monotonic()
        while time.monotonic() < stopped + 20 and _holder(kube, kube_namespace) != follower:
            time.sleep(0.2)
        assert _holder(kube, kube_namespace) == follower, \
            (tmp_path / f"{leader}.log").read_text()[-2000:]
        assert time.monotonic() - stopped < 20
        assert "released the lease" in (tmp_path / f"{leader}.log").read_text()
    finally:
        for replica in replicas.values():
            replica.terminate()
        for replica in replicas.values():
            stop_process(replica)
