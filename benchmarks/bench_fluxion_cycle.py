"""One scheduling pass over a backlog, in memory, on each matcher: CPU per pod and Fluxion's share.

    FLUENCE_FLUXION_LIB=/opt/flux/lib/flux/libreapi_cli.so \\
        python benchmarks/bench_fluxion_cycle.py [--nodes 5000] [--pods 2000] \\
            [--node-cpu 8] [--workloads basic,gangs3] [--matchers embedded,fluxion] \\
            [--baseline REF]

On the in-memory cluster, ``--nodes`` nodes of ``--node-cpu`` CPUs, 32Gi and 110
pods (bench_scale's shape) and ``--pods`` pending pods of ``100m`` and 500Mi:
singles (``basic``) or PodGroups of three (``gangs3``). Each measurement runs in a
fresh process: the scheduler starts (the graph, and Fluxion's load of it), then one
scheduling pass places the backlog with the cluster's writes stubbed out. Per
matcher it prints the start's CPU seconds, the pass's CPU ms per pod and, on
Fluxion, the matches sent (every one a core or memory lease of the shared pool
for these pods) and Fluxion's own time over them (the
``ov`` each match reports; wall-clock, so it includes the machine's load).

``--baseline REF`` runs REF's tree the same way, in turns with this one (REF's own
plugins first on ``PYTHONPATH``; a REF whose Fluxion matcher does not count its
matches shows none).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline import ROOT, baseline_tree, quiet_fake_cluster  # noqa: E402

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _node(i: int, cpu: int) -> dict[str, Any]:
    capacity = {"cpu": str(cpu), "memory": "32Gi", "pods": "110"}
    name = f"node-{i}"
    return {"metadata": {"name": name, "labels": {HOSTNAME: name, ZONE: f"zone-{i % 3}"}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "fluence", "containers": [{
        "name": "c", "image": "pause",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name, "labels": {}}, "spec": spec}


def child(workload: str, nodes: int, pods: int, cpu: int) -> dict[str, Any]:
    """One measurement in this process (whichever tree and matcher the environment gives)."""
    from fluence_core.scheduler.core import Scheduler
    from fluence_core.settings import load_settings

    cluster = quiet_fake_cluster()
    for i in range(nodes):
        cluster.create("nodes", _node(i, cpu))
    if workload == "gangs3":
        for g in range(pods // 3):
            cluster.create("podgroups", {"metadata": {"name": f"g{g}"}, "spec": {
                "schedulingPolicy": {"gang": {"minCount": 3}}}}, "default")
            for m in range(3):
                cluster.create("pods", _pod(f"g{g}-{m}", f"g{g}"), "default")
    else:
        for i in range(pods):
            cluster.create("pods", _pod(f"p{i}"), "default")
    started = time.process_time()
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    start_cpu = time.process_time() - started
    for method in ("bind", "patch", "patch_status"):
        setattr(cluster, method, lambda *a, **k: {})
    cluster.post_event = lambda *a, **k: {}
    inner = getattr(scheduler.matcher, "inner", scheduler.matcher)
    matches, seconds = getattr(inner, "matches", 0), getattr(inner, "match_seconds", 0.0)
    started = time.process_time()
    results = scheduler.schedule_once()
    cpu = time.process_time() - started
    placed = sum(len(r.placed) for r in results)
    return {"matcher": scheduler.matcher.name, "placed": placed,
            "start_cpu_s": round(start_cpu, 2), "ms_per_pod": round(cpu / max(placed, 1) * 1e3, 3),
            "fluxion_matches": getattr(inner, "matches", 0) - matches,
            "fluxion_ms": round((getattr(inner, "match_seconds", 0.0) - seconds) * 1e3, 1)}


def run_child(tree: Path, matcher: str, workload: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ}
    plugins = sorted(str(p) for p in (tree / "plugins").glob("*") if p.is_dir())
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *plugins])
    if matcher == "embedded":
        env["FLUENCE_DISABLE_PLUGINS"] = "fluxion"
    elif not env.get("FLUENCE_FLUXION_LIB"):
        raise SystemExit("the fluxion matcher needs FLUENCE_FLUXION_LIB")
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", workload,
         "--nodes", str(args.nodes), "--pods", str(args.pods), "--node-cpu", str(args.node_cpu)],
        env=env, check=True, capture_output=True, text=True, cwd=tree)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if result["matcher"] != matcher:
        raise SystemExit(f"asked for {matcher}, the scheduler ran {result['matcher']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--node-cpu", type=int, default=8)
    parser.add_argument("--workloads", default="basic,gangs3")
    parser.add_argument("--matchers", default="embedded,fluxion")
    parser.add_argument("--baseline", help="a git ref measured in turns with this tree")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.nodes, args.pods, args.node_cpu)))
        return
    print(f"{args.pods} pods of 100m/500Mi on {args.nodes} nodes of {args.node_cpu} CPUs, in "
          "memory; CPU of one scheduling pass")
    print(f"{'tree':10} {'workload':8} {'matcher':9} {'start s':>8} {'ms/pod':>7} "
          f"{'matches':>8} {'Fluxion ms':>11}")
    with baseline_tree(args.baseline) as base:
        trees = [("this", ROOT)] + ([(args.baseline, base)] if base is not None else [])
        for workload in args.workloads.split(","):
            for matcher in args.matchers.split(","):
                for label, tree in trees:
                    r = run_child(tree, matcher, workload, args)
                    print(f"{label:10} {workload:8} {matcher:9} {r['start_cpu_s']:8.2f} "
                          f"{r['ms_per_pod']:7.3f} {r['fluxion_matches']:8d} "
                          f"{r['fluxion_ms']:11.1f}", flush=True)


if __name__ == "__main__":
    main()
