"""A lost watch history under a backlog of thousands of pods, on a real API server (issue 31).

``fluence up`` runs as users run it, against an API server of its own whose
watches are served by etcd (``--watch-cache=false``), so compacting etcd makes a
watch resumed from before the compaction fail with 410 Gone, as a busy cluster's
does once its history moves on. The scheduler is paused (SIGSTOP) while
:data:`PODS` pods of ``100m`` are created and etcd is compacted, and stays paused
past the end of its watch requests (``FLUENCE_WATCH_CHUNK``), so each watch must
resume from a version the server no longer has. Then it is resumed.

What must hold:
* the 410 did happen (else the test proved nothing) and each watch recovered with
  a re-list or two, never a loop of them;
* every pod is bound within :data:`BOUND_WITHIN` seconds of the resume;
* the scheduler's peak RSS stays under :data:`PEAK_RSS_MIB`.

Before issue 31's fix the pod watch resumed at the version the busy loop last
applied and re-listed at that same version after every watch request. The
figures are printed (``pytest -s``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fluence_core.kube.client import KubeCluster
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.testing_apiserver import (
    ApiServer, compact_etcd, ensure_namespace, find_assets, start_apiserver, stop_process,
)

pytestmark = pytest.mark.e2e

PODS = 3000
NODES = 100
"""Four cores and 110 pods each: room for 4,000 pods of 100m."""
CHUNK = 3
"""FLUENCE_WATCH_CHUNK: seconds of one watch request."""
BOUND_WITHIN = 60.0
PEAK_RSS_MIB = 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    with start_apiserver(assets, tmp_path_factory.mktemp("etcd-watches"), controller_manager=False,
                         apiserver_flags=["--watch-cache=false"]) as running:
        yield running


def _unbound(kube: KubeCluster, namespace: str) -> bool:
    page = kube._call("GET", f"/api/v1/namespaces/{namespace}/pods",
                      query={"fieldSelector": "spec.nodeName=", "limit": 1})
    return bool(page.get("items"))


def _wait_bound(kube: KubeCluster, namespace: str, timeout: float) -> float:
    started = time.monotonic()
    while _unbound(kube, namespace):
        if time.monotonic() - started > timeout:
            raise AssertionError(f"pods in {namespace} still unbound after {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_a_lost_history_under_a_backlog_costs_a_relist_and_every_pod_binds(
        server: ApiServer, tmp_path: Path) -> None:
    kube = server.cluster(qps=2000, burst=2000)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: kube.create(
            "nodes", make_node_dict(f"n{i}", 4, "32Gi", capacity=True)), range(NODES)))
    namespace = ensure_namespace(kube, "burst")
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLUENCE_")}
    environ.pop("KUBERNETES_SERVICE_HOST", None)
    environ.update({"KUBECONFIG": str(server.kubeconfig()), "FLUENCE_LEADER_ELECT": "false",
                    "FLUENCE_METRICS_PORT": "0", "FLUENCE_LOG_LEVEL": "INFO",
                    "FLUENCE_WATCH_CHUNK": str(CHUNK), "FLUENCE_KUBE_QPS": "1000",
                    "FLUENCE_KUBE_BURST": "1000"})
    log_path = tmp_path / "fluence.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", "from fluence_core.cli import main; main()", "up"],
            env=environ, stdout=log, stderr=log)
    try:
        kube.create("pods", make_pod_dict("probe", "100m", namespace=None), namespace)
        _wait_bound(kube, namespace, 60)
        os.kill(process.pid, signal.SIGSTOP)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: kube.create(
                "pods", make_pod_dict(f"p{i}", "100m", namespace=None), namespace), range(PODS)))
        compact_etcd(server)
        time.sleep(CHUNK + 2)  # the paused watches' requests end: each must resume
        os.kill(process.pid, signal.SIGCONT)
        elapsed = _wait_bound(kube, namespace, BOUND_WITHIN)
        peak = _peak_rss_mib(process.pid)
    finally:
        os.kill(process.pid, signal.SIGCONT)
        stop_process(process)
        kube.close()
    text = log_path.read_text(errors="replace")
    relists = {kind: text.count(f"watch {kind} at resourceVersion")
               for kind in ("pods", "nodes", "podgroups")}
    print(f"\n{PODS} pods bound {elapsed:.1f} s after the resume ({PODS / elapsed:.0f} pods/s); "
          f"re-lists after 410: {relists}; peak RSS {peak:.0f} MiB")
    assert relists["pods"] >= 1, "the pod watch never met the 410 this test forces"
    assert max(relists.values()) <= 2, f"a watch kept re-listing: {relists}"
    assert peak < PEAK_RSS_MIB
