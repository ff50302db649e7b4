"""Another tenant's wait behind one tenant's burst of pods that cannot fit, beside kube-scheduler.

    KUBEBUILDER_ASSETS=/path/to/bin python benchmarks/bench_burst.py
        [--burst 2000] [--nodes 100] [--later 5] [--baseline REF] [--json FILE]

One etcd + kube-apiserver (KUBEBUILDER_ASSETS) gets ``--nodes`` nodes of 16 CPUs.
Each scheduler takes its turn on it, as a process of its own
(``benchmarks/peer.py``: kube-scheduler, Fluence from this tree, and with
``--baseline`` Fluence at that git ref from a temporary worktree), all at the
schedulers' default client limits (50 QPS, burst 100):

1. started, and shown ready by binding a probe pod;
2. tenant A creates ``--burst`` pods of 64 CPUs (no node has that many: none can
   ever fit), 16 clients at a time, while the scheduler runs;
3. as soon as the last of them is created, tenant B (another namespace) creates one
   pod of 1 CPU: its wait, from its creation until the API server shows it bound,
   is the figure this benchmark is for;
4. tenant B then creates ``--later`` more such pods, 2 s apart, each timed the same way;
5. the clock that started with the burst's last pod runs until every pod of the burst
   carries ``PodScheduled=False`` (the scheduler's first pass over it, reports
   included), or 180 s;
6. the scheduler is stopped and both tenants' pods deleted.

A pod's wait is read by asking the API server for the pod every 20 ms, so it is
exact to about that. The table shows, per scheduler, how long creating the burst
took, tenant B's first pod's wait, the median and longest of the later pods' waits,
and when the burst's reports were complete; the rows are written as JSON too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline import baseline_tree  # noqa: E402
from peer import (  # noqa: E402
    Peer, Run, _in_parallel, _pod, delete_workload, fluence_peer, kube_scheduler_peer,
)
from fluence_core.testing_apiserver import (  # noqa: E402
    ensure_namespace, find_assets, start_apiserver,
)

LIMITS = (50.0, 100)
"""kube-scheduler's default client limits, which Fluence's defaults follow."""
POLL = 0.02
"""Seconds between two reads of a timed pod."""
LATER_GAP = 2.0
"""Seconds between tenant B's later pods."""
REPORTS_TIMEOUT = 180.0


@dataclass
class Row:
    scheduler: str
    burst: int
    nodes: int
    burst_created_s: float
    """Seconds creating the burst took (the scheduler running meanwhile)."""
    first_wait_s: float
    """Tenant B's first pod: created right after the burst's last, until bound."""
    later_waits_s: list[float] = field(default_factory=list)
    reports_done_s: float | None = None
    """From the burst's last creation until every pod of it carried PodScheduled=False
    (None: not within the timeout)."""
    reported: int = 0
    """Pods of the burst that carried PodScheduled=False when the clock stopped."""


def wait_bound(kube: Any, name: str, namespace: str, timeout: float = 300.0) -> float:
    """Seconds from now until pod ``name`` shows a node (TimeoutError past ``timeout``)."""
    started = time.perf_counter()
    while True:
        pod = kube.get("pods", name, namespace) or {}
        if (pod.get("spec") or {}).get("nodeName"):
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"pod {namespace}/{name} still unbound after {timeout:.0f} s")
        time.sleep(POLL)


def timed_pod(kube: Any, peer: Peer, name: str, namespace: str) -> float:
    """Create a 1-CPU pod for ``peer`` and return its wait from just before its creation
    until it is bound."""
    started = time.perf_counter()
    kube.create("pods", _pod(name, peer.scheduler_name, None), namespace)
    return time.perf_counter() - started + wait_bound(kube, name, namespace)


def unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in conditions)


def reports_done(kube: Any, namespace: str, expected: int, since: float) -> tuple[float | None,
                                                                                  int]:
    """Seconds from ``since`` (a perf_counter time) until ``expected`` pods of ``namespace``
    carry PodScheduled=False, polled each second; None and the count on timeout."""
    reported = 0
    while time.perf_counter() - since < REPORTS_TIMEOUT:
        reported = sum(1 for p in kube.list("pods", namespace).items if unschedulable(p))
        if reported >= expected:
            return time.perf_counter() - since, reported
        time.sleep(1.0)
    return None, reported


def turn(run: Run, peer: Peer, burst: int, later: int) -> Row:
    """One scheduler's turn: burst, tenant B's pods, the burst's reports; then clean up."""
    kube = run.kube
    stamp = int(time.time() * 1000) % 10**8
    tenant_a = ensure_namespace(kube, f"{peer.name}-a-{stamp}")
    tenant_b = ensure_namespace(kube, f"{peer.name}-b-{stamp}")
    with peer.running(run.server, LIMITS, run.workdir) as process:
        run.ready(peer, process, tenant_b)
        pods = [_pod(f"burst-{i}", peer.scheduler_name, None, cpu="64") for i in range(burst)]
        started = time.perf_counter()
        _in_parallel(lambda p: kube.create("pods", p, tenant_a), pods)
        created = time.perf_counter()
        row = Row(peer.name, burst, run.nodes, created - started,
                  timed_pod(kube, peer, "tenant-b-0", tenant_b))
        for i in range(later):
            time.sleep(LATER_GAP)
            row.later_waits_s.append(timed_pod(kube, peer, f"tenant-b-{i + 1}", tenant_b))
        row.reports_done_s, row.reported = reports_done(kube, tenant_a, burst, created)
    delete_workload(kube, tenant_a)
    delete_workload(kube, tenant_b)
    return row


def print_row(row: Row) -> None:
    later = row.later_waits_s
    median = f"{statistics.median(later):6.2f}" if later else "     -"
    longest = f"{max(later):6.2f}" if later else "     -"
    reports = (f"{row.reports_done_s:7.1f}" if row.reports_done_s is not None
               else f"  >{REPORTS_TIMEOUT:.0f} ({row.reported})")
    print(f"{row.scheduler:15} {row.burst_created_s:9.1f} {row.first_wait_s:11.2f} "
          f"{median} {longest} {reports}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--burst", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--later", type=int, default=5)
    parser.add_argument("--baseline", help="Fluence at this git ref takes its turn too")
    parser.add_argument("--json", type=Path, default=Path("bench-burst.json"))
    parser.add_argument("--only", help="comma-separated schedulers to run (kube-scheduler, "
                        "fluence, before)")
    args = parser.parse_args()
    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(f"needs a real API server: {reason}")
    binary = Path(os.environ.get("KUBE_SCHEDULER") or assets / "kube-scheduler")
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"no kube-scheduler at {binary} (set KUBE_SCHEDULER)")
    rows: list[Row] = []
    with baseline_tree(args.baseline) as base, tempfile.TemporaryDirectory() as tmp, \
            start_apiserver(assets, Path(tmp), controller_manager=False) as server:
        run = Run(server, args.nodes, Path(tmp))
        kubeconfig = server.kubeconfig()
        peers = [kube_scheduler_peer(binary, kubeconfig), fluence_peer(kubeconfig)]
        if base is not None:
            peers.append(fluence_peer(kubeconfig, "before", base))
        only = set(args.only.split(",")) if args.only else None
        print(f"{args.burst} pods of tenant A that cannot fit, on {args.nodes} nodes; "
              f"tenant B's pods of 1 CPU (seconds)")
        print(f"{'scheduler':15} {'burst made':>9} {'first wait':>11} {'later':>6} "
              f"{'max':>6} {'reports done':>7}")
        for peer in peers:
            if only is not None and peer.name not in only:
                continue
            rows.append(turn(run, peer, args.burst, args.later))
            print_row(rows[-1])
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
