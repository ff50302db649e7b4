"""``fluence up`` against an API server where nothing of Fluence is installed.

No namespace, no manifest, no Lease: the scheduler takes its Lease where
kube-scheduler keeps its own (``kube-system``) and places a pod; a Lease
namespace that does not exist is one error line, at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import ApiServer, free_port, stop_process

pytestmark = pytest.mark.e2e

FLUENCE = [sys.executable, "-m", "fluence_core.cli"]


def _env(apiserver: ApiServer, **extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLUENCE_")}
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    environ.update(KUBECONFIG=str(apiserver.kubeconfig()), POD_NAME="first-run",
                   FLUENCE_METRICS_PORT=str(free_port()), **extra)
    return environ


def test_up_on_a_bare_api_server_leads_from_kube_system_and_places_a_pod(
    apiserver: ApiServer, kube: KubeCluster, kube_namespace: str, tmp_path: Path
) -> None:
    # No manifest applied: nothing of Fluence's RBAC, no Lease (other tests of the session
    # may have made the fluence-system namespace; fluence up does not look for it).
    assert kube.get("leases", "fluence-scheduler", names.KUBE_SYSTEM) is None
    assert kube.get("clusterroles", "fluence-scheduler") is None
    node = f"{kube_namespace}-first"
    kube.create("nodes", make_node_dict(node, 2, "4Gi", pods=10,
                                        labels={"e2e-ns": kube_namespace}, capacity=True))
    log = tmp_path / "up.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*FLUENCE, "up"], env=_env(apiserver), stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        lease = None
        while time.monotonic() < deadline and process.poll() is None:
            lease = kube.get("leases", "fluence-scheduler", names.KUBE_SYSTEM)
            if lease and lease["spec"].get("holderIdentity") == "first-run":
                break
            time.sleep(0.3)
        assert lease is not None and process.poll() is None, log.read_text()[-3000:]
        kube.create("pods", make_pod_dict("first", "1", namespace=None,
                                          nodeSelector={"e2e-ns": kube_namespace}),
                    kube_namespace)
        while time.monotonic() < deadline:
            if kube.get("pods", "first", kube_namespace)["spec"].get("nodeName"):
                break
            time.sleep(0.3)
        assert kube.get("pods", "first", kube_namespace)["spec"].get("nodeName") == node, \
            log.read_text()[-3000:]
    finally:
        stop_process(process)
        kube.delete("nodes", node)
    lines = log.read_text().splitlines()
    print("\n".join(["first 10 log lines of fluence up:", *lines[:10]]))
    assert any(f"waiting for lease {names.KUBE_SYSTEM}/fluence-scheduler as first-run" in line
               for line in lines)


def test_up_names_a_missing_lease_namespace_and_exits(apiserver: ApiServer) -> None:
    started = time.monotonic()
    done = subprocess.run([*FLUENCE, "up"], env=_env(apiserver, FLUENCE_LEASE_NAMESPACE="nowhere"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert ("error: cannot take the leader Lease nowhere/fluence-scheduler: namespace nowhere "
            "does not exist") in done.stderr
    assert time.monotonic() - started < 60
