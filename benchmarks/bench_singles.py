"""Single pods: Fluence's own CPU per pod, as a ratio to a baseline commit measured in the same run.

    python benchmarks/bench_singles.py --baseline REF[,REF...] [--pods 1000] [--repeat 5]

Each REF is checked out into a temporary git worktree. Each measurement runs in a
fresh Python process, taking turns between the working tree and each REF, so all
meet the same (noisy, shared) machine at nearly the same time; the table shows
the median of each, its minimum (the run the machine disturbed least) and the
ratios of both to this tree's. Both run the same installed dependencies and
plugins; only ``fluence_core`` differs (``PYTHONPATH`` puts the chosen tree first).

Measured per case, on the in-memory cluster with 100 nodes of 64 cores:

* ``cycle``: CPU seconds of the scheduling pass that places N pending single
  pods, per pod, with the cluster's writes stubbed out (what the scheduler
  itself spends: grouping, requests, hooks, match, commit, bind bookkeeping);
* ``cycle+log``: the same with the INFO log on (as ``fluence up`` runs);
* with each, the API requests made per bound pod (counted at the cluster
  boundary: binds, patches, status patches, events).

With ``--apiserver`` (KUBEBUILDER_ASSETS set), both trees also run ``fluence up``
as a process on one real API server with 100 nodes, taking turns on the same
workloads (benchmarks/peer.py: paused while the pods are created, timed from
resume to the last bind), at the default client limits and at 5,000 QPS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from baseline import ROOT, baseline_tree, quiet_fake_cluster


def _node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "1000"}
    return {"metadata": {"name": f"bench-{i}"},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str) -> dict[str, Any]:
    requests = {"cpu": "2", "memory": "1Gi"}
    return {"metadata": {"name": name},
            "spec": {"schedulerName": "fluence",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": requests}}]}}


def child(case: str, pods: int) -> dict[str, float]:
    """One measurement in this process (whichever fluence_core is first on the path)."""
    import time

    from fluence_core import log
    from fluence_core.scheduler.core import Scheduler
    from fluence_core.settings import load_settings

    # the log's handler writes to stderr (dropped), as under fluence up
    cluster = quiet_fake_cluster()
    if case == "cycle+log":
        log.configure("INFO")
    for i in range(100):
        cluster.create("nodes", _node(i))
    for i in range(pods):
        cluster.create("pods", _pod(f"single-{i}"), "default")
    scheduler = Scheduler(cluster, load_settings(), bind_workers=0)
    scheduler.start()
    calls = {"n": 0}

    def count(result: Any = None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            return result
        return call

    for method in ("bind", "patch", "patch_status"):
        setattr(cluster, method, count({}))
    cluster.post_event = count({})  # type: ignore[method-assign]
    started = time.process_time()
    results = scheduler.schedule_once()
    cpu = time.process_time() - started
    placed = sum(len(r.placed) for r in results)
    if placed != pods:
        raise SystemExit(f"placed {placed} of {pods}")
    return {"us_per_pod": cpu / pods * 1e6, "requests_per_pod": calls["n"] / pods}


def run_child(tree: Path, case: str, pods: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case,
                          "--pods", str(pods)], env=env, check=True, capture_output=True,
                         text=True, cwd=tree)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline",
                        help="git refs to compare with, comma-separated (temporary worktrees)")
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--apiserver", action="store_true",
                        help="also compare the first REF and this tree on a real API server")
    parser.add_argument("--cases", default="cycle,cycle+log",
                        help="which of cycle, cycle+log to run (comma-separated)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.pods)))
        return
    if not args.baseline:
        parser.error("--baseline REF is required")
    refs = args.baseline.split(",")
    with contextlib.ExitStack() as trees:
        bases: dict[str, Path] = {}
        for ref in refs:
            base = trees.enter_context(baseline_tree(ref))
            assert base is not None
            bases[ref] = base
        compare(bases, args.pods, args.repeat, args.cases.split(","))
        if args.apiserver:
            compare_on_apiserver(bases[refs[0]], refs[0], args.repeat)


def compare(bases: dict[str, Path], pods: int, repeat: int, cases: list[str]) -> None:
    print(f"{pods} single pods, 100 nodes x 64 cores, median and min of {repeat}; "
          f"ratio = REF / this tree")
    print(f"{'case':10} {'measure':17} {'tree':14} {'median':>8} {'min':>8} "
          f"{'ratio':>6} {'min ratio':>9}")
    trees = {**bases, "this tree": ROOT}
    for case in cases:
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(repeat):
            for name, tree in trees.items():
                samples[name].append(run_child(tree, case, pods))
        for measure in ("us_per_pod", "requests_per_pod"):
            here = [s[measure] for s in samples["this tree"]]
            for name in trees:
                values = [s[measure] for s in samples[name]]
                median, least = statistics.median(values), min(values)
                ratio = median / statistics.median(here) if statistics.median(here) else 0.0
                least_ratio = least / min(here) if min(here) else 0.0
                print(f"{case:10} {measure:17} {name[:14]:14} {median:8.1f} {least:8.1f} "
                      f"{ratio:5.2f}x {least_ratio:8.2f}x", flush=True)


def compare_on_apiserver(base: Path, ref: str, repeat: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peer import LIMITS, WORKLOADS, Run, fluence_peer

    from fluence_core.testing_apiserver import find_assets, start_apiserver

    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(reason)
    print(f"fluence up on kube-apiserver, 100 nodes, median pods/s of {repeat}; baseline {ref}")
    print(f"{'limits':9} {'workload':17} {'baseline':>9} {'this tree':>9} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp, \
            start_apiserver(assets, Path(tmp), controller_manager=False) as server:
        run = Run(server, 100, Path(tmp))
        kubeconfig = server.kubeconfig()
        old = fluence_peer(kubeconfig, "baseline", base)
        new = fluence_peer(kubeconfig, "head", ROOT)
        for limits in LIMITS:
            for workload in WORKLOADS:
                rates: dict[str, list[float]] = {"baseline": [], "head": []}
                for _ in range(repeat):
                    for peer in (old, new):
                        rates[peer.name].append(run.scenario(peer, limits, workload)[0])
                before = statistics.median(rates["baseline"])
                after = statistics.median(rates["head"])
                print(f"{limits:9} {workload:17} {before:9.1f} {after:9.1f} "
                      f"{after / before:6.2f}x", flush=True)


if __name__ == "__main__":
    main()
