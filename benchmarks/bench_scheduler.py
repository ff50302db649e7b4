"""Pods bound per second: 1,000 single pods, and 50 gangs of 20, on 100 nodes; and
1,000 pods of ``100m`` on 100 nodes of 8 CPUs (room for 8,000 of them).

    python benchmarks/bench_scheduler.py            # in-memory cluster
    KUBEBUILDER_ASSETS=/path/to/bin python benchmarks/bench_scheduler.py   # plus a real API server
    KUBEBUILDER_ASSETS=/path/to/bin python benchmarks/bench_scheduler.py --peer [--nodes 100,1000]
        # Fluence beside kube-scheduler on one API server (see benchmarks/peer.py);
        # --baseline REF adds Fluence at REF, --audit prints each one's requests

The pods are created first; the clock runs from the scheduler's start (list,
graph, restore) until the last pod is bound, so the figure is the scheduler's
throughput, not the API server's create rate. Against a real server every bind,
event, status and record write is a real request through the token bucket
(set high here: QPS 2000, burst 2000). Each case runs twice in the same run:
binding in the scheduling loop, and on 8 bind workers (``fluence up``'s default).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fluence_core.kube.api import ClusterAPI
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import ensure_namespace, find_assets, start_apiserver



TIMEOUT = 180.0
"""A case not fully bound by then is reported with how many were."""


def _node(i: int, cpu: int) -> dict[str, Any]:
    capacity = {"cpu": str(cpu), "memory": f"{4 * cpu}Gi", "pods": "1000"}
    return {"metadata": {"name": f"bench-{cpu}-{i}"},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, group: str | None, cpu: str = "2") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "1Gi"} if cpu == "2" else {"cpu": cpu}
    spec: dict[str, Any] = {"schedulerName": "fluence",
                            "containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": requests}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name}, "spec": spec}


def scenario(cluster: ClusterAPI, namespace: str, singles: int, gangs: int, gang_size: int,
             bind_workers: int, cpu: str = "2") -> tuple[int, int, float]:
    """(pods, pods bound, seconds until all were bound or TIMEOUT passed)."""
    ensure_namespace(cluster, namespace)
    for i in range(singles):
        cluster.create("pods", _pod(f"single-{i}", None, cpu), namespace)
    for g in range(gangs):
        cluster.create(
            "podgroups",
            {
                "metadata": {"name": f"gang-{g}"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": gang_size}}},
            },
            namespace,
        )
        for m in range(gang_size):
            cluster.create("pods", _pod(f"gang-{g}-{m}", f"gang-{g}"), namespace)
    total = singles + gangs * gang_size
    scheduler = Scheduler(cluster, load_settings(), bind_workers=bind_workers)
    stop = threading.Event()
    started = time.perf_counter()
    thread = threading.Thread(target=scheduler.run, args=(stop,), kwargs={"idle": 0.2}, daemon=True)
    thread.start()
    while True:
        bound = sum(1 for p in cluster.list("pods", namespace).items if p["spec"].get("nodeName"))
        if bound >= total or time.perf_counter() - started > TIMEOUT:
            break
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join(timeout=90)
    return total, bound, elapsed


CASES = (  # node CPUs, case name, single pods, gangs of 20, each pod's CPU
    (64, "1000 single pods", 1000, 0, "2"),
    (64, "50 gangs of 20", 0, 50, "2"),
    (8, "1000 pods of 100m", 1000, 0, "100m"),
)


def run_on(cluster: ClusterAPI, label: str) -> None:
    for node_cpu, name, singles, gangs, cpu in CASES:
        for stale in cluster.list("nodes").items:
            if not stale["metadata"]["name"].startswith(f"bench-{node_cpu}-"):
                cluster.delete("nodes", stale["metadata"]["name"])
        for i in range(100):
            if cluster.get("nodes", f"bench-{node_cpu}-{i}") is None:
                cluster.create("nodes", _node(i, node_cpu))
        rates = []
        for workers in (0, 8):
            namespace = f"bench-{name.split()[0]}-{cpu.lower()}-w{workers}-{int(time.time())}"
            total, bound, elapsed = scenario(cluster, namespace, singles, gangs, 20, workers, cpu)
            rates.append(bound / elapsed)
            mode = "bind in loop" if workers == 0 else f"{workers} bind workers"
            print(f"{label:20} {name:17} {mode:15} {bound:5d}/{total} pods bound in "
                  f"{elapsed:7.2f} s = {bound / elapsed:8.1f} pods/s")
            for pod in cluster.list("pods", namespace).items:
                cluster.delete("pods", pod["metadata"]["name"], namespace, grace_period_seconds=0)
        print(f"{label:20} {name:17} async / in-loop = {rates[1] / rates[0]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="store_true",
                        help="Fluence beside kube-scheduler on a real API server")
    parser.add_argument("--nodes", default="100,1000", help="node counts of --peer")
    parser.add_argument("--json", type=Path, default=Path("bench-peer.json"),
                        help="where --peer writes its rows")
    parser.add_argument("--audit", action="store_true",
                        help="--peer: print each scheduler's requests from the audit log")
    parser.add_argument("--baseline", help="--peer: Fluence at this git ref takes its turn too")
    parser.add_argument("--limits", help="--peer: only these client limits (comma-separated)")
    parser.add_argument("--workloads", help="--peer: only these workloads (comma-separated)")
    args = parser.parse_args()
    if args.peer:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from baseline import baseline_tree
        from peer import run_peer

        assets, reason = find_assets()
        if assets is None:
            raise SystemExit(f"--peer needs a real API server: {reason}")
        # Fluence at --baseline's commit takes its turn too, from a worktree
        with baseline_tree(args.baseline) as baseline:
            run_peer(assets, [int(n) for n in args.nodes.split(",")], args.json,
                     audited=args.audit,
                     limits_names=args.limits.split(",") if args.limits else None,
                     workload_names=args.workloads.split(",") if args.workloads else None,
                     baseline=baseline)
        return
    import logging

    logging.getLogger("fluence").setLevel(logging.WARNING)
    run_on(FakeCluster(), "in-memory cluster")
    assets, reason = find_assets()
    if assets is None:
        print(f"(real API server skipped: {reason})")
        return
    with tempfile.TemporaryDirectory() as workdir:
        with start_apiserver(assets, Path(workdir), controller_manager=False) as server:
            cluster = server.cluster(qps=2000, burst=2000)
            run_on(cluster, "kube-apiserver 1.36")


if __name__ == "__main__":
    main()
