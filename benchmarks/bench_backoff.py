"""What a backlog that cannot fit costs each cycle, with and without backoff (issue 31).

    python benchmarks/bench_backoff.py [--nodes 1000] [--backlog 1000] [--cycles 30]
                                       [--baseline REF] [--repeat 3]

On the in-memory cluster, ``--nodes`` nodes of 4 CPUs hold nothing a ``--backlog`` of
5-CPU pods could use: each attempt at one of them matches, fails, and explains why
(kube-scheduler's "0/N nodes are available" over every node). Then a stream runs:
in each cycle a running pod is deleted (it frees room: a change after which a
failed group is tried again) and a small pod arrives, and the virtual clock moves
100 ms on (10 pods a second), for ``--cycles`` cycles. Measured: the scheduler's CPU
milliseconds per cycle over the stream, and how many attempts the backlog took.

Each case runs in a fresh process, taking turns ``--repeat`` times, the median shown:

* ``backoff``: this tree as it ships (1 s initial backoff, doubled, at most 10 s);
* ``no backoff``: this tree with ``FLUENCE_POD_INITIAL_BACKOFF_SECONDS=0``, every
  failed group tried again at the next change, as before backoff;
* ``REF``: with ``--baseline``, that commit (a temporary worktree) with its defaults.
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

STEP = 0.1
"""Virtual seconds between two cycles of the stream."""


def _node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"metadata": {"name": f"node-{i}"},
            "status": {"capacity": capacity, "allocatable": capacity}}


def _pod(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"schedulerName": "fluence",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu,
                                                                "memory": "100Mi"}}}]}}


def child(nodes: int, backlog: int, cycles: int) -> dict[str, float]:
    """One measurement in this process (whichever fluence_core is first on the path)."""
    import time

    from fluence_core.scheduler.core import Scheduler
    from fluence_core.settings import load_settings

    cluster = quiet_fake_cluster()
    for i in range(nodes):
        cluster.create("nodes", _node(i))
    for i in range(backlog):
        cluster.create("pods", _pod(f"big-{i}", "5"), "default")
    for i in range(cycles):  # running pods; one finishes in each cycle of the stream
        cluster.create("pods", _pod(f"running-{i}", "100m"), "default")
    now = [0.0]
    scheduler = Scheduler(cluster, load_settings(), clock=lambda: now[0])
    scheduler.start()
    first = scheduler.schedule_once()  # the running pods bind, the backlog fails once
    scheduler.pump()
    attempts = 0
    started = time.process_time()
    for i in range(cycles):
        now[0] += STEP
        cluster.delete("pods", f"running-{i}", "default")  # frees room: a change that counts
        cluster.create("pods", _pod(f"small-{i}", "100m"), "default")
        scheduler.pump()
        results = scheduler.schedule_once()
        attempts += sum(1 for r in results if r.group.startswith("default/big-"))
    cpu = time.process_time() - started
    return {"first_cycle_groups": len(first), "ms_per_cycle": cpu / cycles * 1e3,
            "backlog_attempts": attempts}


def run_child(tree: Path, env: dict[str, str], args: argparse.Namespace) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", "--nodes", str(args.nodes),
         "--backlog", str(args.backlog), "--cycles", str(args.cycles)],
        env={**os.environ, "PYTHONPATH": str(tree), **env}, check=True, capture_output=True,
        text=True, cwd=tree)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="a git ref to compare with (temporary worktree)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.nodes, args.backlog, args.cycles)))
        return
    cases: dict[str, tuple[Path, dict[str, str]]] = {
        "backoff": (ROOT, {}),
        "no backoff": (ROOT, {"FLUENCE_POD_INITIAL_BACKOFF_SECONDS": "0"}),
    }
    with baseline_tree(args.baseline) as base:
        if args.baseline and base is not None:
            cases[args.baseline] = (base, {})
        compare(cases, args)


def compare(cases: dict[str, tuple[Path, dict[str, str]]], args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, (tree, env) in cases.items():
            runs[name].append(run_child(tree, env, args))
    print(f"{args.backlog} pods that cannot fit on {args.nodes} nodes, then {args.cycles} "
          f"cycles each after a change ({STEP * 1e3:.0f} ms apart); median of {args.repeat}")
    ours = statistics.median(r["ms_per_cycle"] for r in runs["backoff"])
    print(f"{'case':12} {'first cycle groups':>18} {'ms/cycle':>9} {'backlog attempts':>17} "
          f"{'ratio to backoff':>17}")
    for name, found in runs.items():
        ms = statistics.median(r["ms_per_cycle"] for r in found)
        print(f"{name:12} {found[0]['first_cycle_groups']:18.0f} {ms:9.1f} "
              f"{statistics.median(r['backlog_attempts'] for r in found):17.0f} "
              f"{ms / ours:16.1f}x")


if __name__ == "__main__":
    main()
