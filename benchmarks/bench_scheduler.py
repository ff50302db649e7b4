"""Pods bound per second: 1,000 single pods, and 50 gangs of 20, on 100 nodes.

    python benchmarks/bench_scheduler.py            # in-memory cluster
    KUBEBUILDER_ASSETS=/path/to/bin python benchmarks/bench_scheduler.py   # plus a real API server

The pods are created first; the clock runs from the scheduler's start (list,
graph, restore) until the last pod is bound, so the figure is the scheduler's
throughput, not the API server's create rate. Against a real server every bind,
event, status and record write is a real request through the token bucket
(set high here: QPS 2000, burst 2000). Each case runs twice in the same run:
binding in the scheduling loop, and on 8 bind workers (``fluence up``'s default).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fluence_core.cluster_api import ClusterAPI
from fluence_core.fake_cluster import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import ensure_namespace, find_assets, start_apiserver


def _node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
    return {"metadata": {"name": f"bench-{i}"}, "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, group: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "fluence",
                            "containers": [{"name": "c", "image": "busybox",
                                            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name}, "spec": spec}


def scenario(cluster: ClusterAPI, namespace: str, singles: int, gangs: int, gang_size: int,
             bind_workers: int) -> tuple[int, float]:
    ensure_namespace(cluster, namespace)
    for i in range(singles):
        cluster.create("pods", _pod(f"single-{i}", None), namespace)
    for g in range(gangs):
        cluster.create("podgroups", {"metadata": {"name": f"gang-{g}"},
                                     "spec": {"schedulingPolicy": {"gang": {"minCount": gang_size}}}}, namespace)
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
        if bound >= total:
            break
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join(timeout=90)
    return total, elapsed


def run_on(cluster: ClusterAPI, label: str) -> None:
    for i in range(100):
        if cluster.get("nodes", f"bench-{i}") is None:
            cluster.create("nodes", _node(i))
    for name, singles, gangs in (("1000 single pods", 1000, 0), ("50 gangs of 20", 0, 50)):
        rates = []
        for workers in (0, 8):
            namespace = f"bench-{name.split()[0]}-w{workers}-{int(time.time())}"
            total, elapsed = scenario(cluster, namespace, singles, gangs, 20, workers)
            rates.append(total / elapsed)
            mode = "bind in loop" if workers == 0 else f"{workers} bind workers"
            print(f"{label:20} {name:17} {mode:15} {total:5d} pods in {elapsed:7.2f} s = "
                  f"{total / elapsed:8.1f} pods/s")
            for pod in cluster.list("pods", namespace).items:
                cluster.delete("pods", pod["metadata"]["name"], namespace, grace_period_seconds=0)
        print(f"{label:20} {name:17} async / in-loop = {rates[1] / rates[0]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
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
