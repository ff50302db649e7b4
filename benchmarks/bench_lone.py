"""Lone pods whose filters read the placed pods: Fluence's CPU per pod, in memory, against a
baseline commit measured in the same run.

    python benchmarks/bench_lone.py --baseline REF [--nodes 1000] [--pods 500]
                                    [--shapes antiaffinity,spread,basic] [--repeat 3]

On the in-memory cluster, ``--nodes`` nodes shaped like scheduler_perf's default
(4 CPUs, 32Gi, 110 pods, three zones) and ``--pods`` pending pods of ``100m`` of
one shape; one scheduling pass places them all, with the cluster's writes
stubbed out (what the scheduler itself spends: filters, scores, match, commit).

* ``antiaffinity``: required pod anti-affinity on the hostname against its own
  label (bench_scale's anti-affinity workload);
* ``spread``: a zone spread, maxSkew 1, DoNotSchedule;
* ``basic``: no constraint (filters of the nodes alone; a control).

Each measurement runs in a fresh process, taking turns between this tree and REF
(a temporary worktree, first on ``PYTHONPATH``); the table shows the median of
``--repeat`` and the ratio REF / this tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from baseline import ROOT, baseline_tree, quiet_fake_cluster

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    name = f"node-{i}"
    return {"metadata": {"name": name, "labels": {HOSTNAME: name, ZONE: f"zone-{i % 3}"}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, shape: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "fluence", "containers": [{
        "name": "c", "image": "pause",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    labels: dict[str, str] = {}
    if shape == "antiaffinity":
        labels = {"color": "green"}
        term = {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME}
        spec["affinity"] = {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif shape == "spread":
        labels = {"app": "spread"}
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels}}]
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


def child(shape: str, nodes: int, pods: int) -> dict[str, float]:
    """One measurement in this process (whichever fluence_core is first on the path)."""
    import time

    from fluence_core.scheduler.core import Scheduler
    from fluence_core.settings import load_settings

    cluster = quiet_fake_cluster()
    for i in range(nodes):
        cluster.create("nodes", _node(i))
    for i in range(pods):
        cluster.create("pods", _pod(f"p{i}", shape), "default")
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    for method in ("bind", "patch", "patch_status"):
        setattr(cluster, method, lambda *a, **k: {})
    cluster.post_event = lambda *a, **k: {}
    started = time.process_time()
    results = scheduler.schedule_once()
    cpu = time.process_time() - started
    placed = sum(len(r.placed) for r in results)
    if placed != pods:
        raise SystemExit(f"placed {placed} of {pods}")
    return {"ms_per_pod": cpu / pods * 1e3}


def run_child(tree: Path, shape: str, args: argparse.Namespace) -> float:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", shape,
         "--nodes", str(args.nodes), "--pods", str(args.pods)],
        env={**os.environ, "PYTHONPATH": str(tree)}, check=True, capture_output=True,
        text=True, cwd=tree)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["ms_per_pod"])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", help="a git ref to compare with (temporary worktree)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--shapes", default="antiaffinity,spread,basic")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.nodes, args.pods)))
        return
    if not args.baseline:
        parser.error("--baseline REF is required")
    with baseline_tree(args.baseline) as base:
        assert base is not None
        print(f"{args.pods} lone pods on {args.nodes} nodes, CPU ms per pod, median of "
              f"{args.repeat}; ratio = {args.baseline} / this tree")
        print(f"{'shape':14} {'this tree':>10} {args.baseline:>12} {'ratio':>7}")
        for shape in args.shapes.split(","):
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(run_child(ROOT, shape, args))
                theirs.append(run_child(base, shape, args))
            mine, before = statistics.median(ours), statistics.median(theirs)
            print(f"{shape:14} {mine:10.2f} {before:12.2f} {before / mine:6.2f}x",
                  flush=True)


if __name__ == "__main__":
    main()
