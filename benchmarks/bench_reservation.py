"""What a reservation costs and what it buys: a big gang under a stream of later small pods.

    python benchmarks/bench_reservation.py [--nodes 16 --cores 8 --gang 8 --gang-cpu 8
                                            --every 1.0 --horizon 600 --matchers embedded,fluxion]

The real scheduler over the in-memory cluster, in virtual time (one cycle a second):
``--nodes`` nodes of ``--cores`` CPUs; from the start another tenant streams pods of
``--small-cpu`` CPUs, one every ``--every`` seconds, each running a time drawn from
``--run`` (seconds, uniform; seeded), more than the cluster can run, so later small pods
always wait. At ``--gang-at`` a gang of ``--gang`` pods of ``--gang-cpu`` CPUs arrives; once
placed it runs ``--gang-run`` seconds. Three ways:

* ``off``: ``FLUENCE_RESERVE_AFTER_SECONDS=0``, no reservation (every freed node goes to
  the next small pod);
* ``reserve``: reservations after ``--wait`` seconds (the setting's, 10 by default); the
  small pods have no walltime, so nothing backfills and the gang's room is taken as it
  frees;
* ``reserve+walltime``: the same, the small pods carrying ``activeDeadlineSeconds`` (the
  top of ``--run``), so those that end before the reservation starts backfill into it.

Over the window from the gang's arrival to ``--horizon``: the gang's time to place, CPU
utilisation (CPU-seconds of running pods over the cluster's), the small pods' wait from
creation to binding (mean and 95th percentile; those still waiting at the horizon count
their wait so far), how many small pods finished, and the scheduler's CPU milliseconds
per cycle (median, worst). ``--matchers`` picks the matchers (Fluxion only with
``FLUENCE_FLUXION_LIB``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from dataclasses import dataclass, field

from fluence_core.kube.api import NAMESPACES, NODES, PODGROUPS, PODS
from fluence_core.kube.fake import FakeCluster
from fluence_core.log import configure
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict, make_pod_group_dict

SMALL = "tenant-b"
"""The namespace of the stream."""
GANG = "tenant-a"


@dataclass
class _Pod:
    cpu: int
    created: float
    runtime: float
    bound: float | None = None
    done: bool = False


@dataclass
class Outcome:
    gang_placed_after: float | None
    utilisation: float
    small_wait_mean: float
    small_wait_p95: float
    small_finished: int
    small_unbound: int
    cycle_ms: list[float] = field(default_factory=list)


def run(way: str, args: argparse.Namespace) -> Outcome:
    """One way of the benchmark, on the matcher the environment selects."""
    now = [0.0]
    cluster = FakeCluster(clock=lambda: now[0])
    wait = "0" if way == "off" else str(args.wait)
    settings = load_settings(reserve_after_seconds=float(wait))
    for namespace in (SMALL, GANG):
        cluster.create(NAMESPACES, {"metadata": {"name": namespace}})
    for i in range(args.nodes):
        cluster.create(NODES, make_node_dict(f"n{i}", args.cores, "64Gi"))
    scheduler = Scheduler(cluster, settings, clock=lambda: now[0])
    scheduler.start()
    low, high = args.run
    rng = random.Random(args.seed)
    pods: dict[str, _Pod] = {}
    walltime = {"activeDeadlineSeconds": int(high)} if way == "reserve+walltime" else {}
    arrivals = 0
    next_arrival = 0.0
    cycle_ms = []
    steps = int(args.horizon)
    for step in range(steps + 1):
        now[0] = float(step)
        for key, pod in pods.items():
            if pod.bound is not None and not pod.done and now[0] >= pod.bound + pod.runtime:
                namespace, name = key.split("/")
                cluster.patch_status(PODS, name, {"status": {"phase": "Succeeded"}}, namespace)
                pod.done = True
        while next_arrival <= now[0]:
            name = f"small-{arrivals:05d}"
            cluster.create(PODS, make_pod_dict(name, str(args.small_cpu), namespace=SMALL,
                                               **walltime), SMALL)
            pods[f"{SMALL}/{name}"] = _Pod(args.small_cpu, now[0], rng.uniform(low, high))
            arrivals += 1
            next_arrival += args.every
        if step == args.gang_at:
            cluster.create(PODGROUPS, make_pod_group_dict("big", args.gang, GANG), GANG)
            for i in range(args.gang):
                cluster.create(PODS, make_pod_dict(f"big-{i}", str(args.gang_cpu),
                                                   namespace=GANG, group="big"), GANG)
                pods[f"{GANG}/big-{i}"] = _Pod(args.gang_cpu, now[0], args.gang_run)
        scheduler.pump()
        started = time.process_time()
        results = scheduler.schedule_once()
        cycle_ms.append((time.process_time() - started) * 1e3)
        scheduler.pump()
        for result in results:
            for key in result.placed:
                pods[key].bound = now[0]
    return _measure(pods, args, cycle_ms)


def _measure(pods: dict[str, _Pod], args: argparse.Namespace, cycle_ms: list[float]) -> Outcome:
    start, end = float(args.gang_at), float(args.horizon)
    gang = [p for k, p in pods.items() if k.startswith(f"{GANG}/")]
    placed = None if any(p.bound is None for p in gang) else max(
        p.bound for p in gang if p.bound is not None) - start
    used = 0.0
    for pod in pods.values():
        if pod.bound is None:
            continue
        overlap = min(end, pod.bound + pod.runtime) - max(start, pod.bound)
        used += pod.cpu * max(0.0, overlap)
    small = [p for k, p in pods.items() if k.startswith(f"{SMALL}/") and p.created >= start]
    waits = sorted((p.bound if p.bound is not None else end) - p.created for p in small)
    return Outcome(
        gang_placed_after=placed,
        utilisation=used / (args.nodes * args.cores * (end - start)),
        small_wait_mean=statistics.fmean(waits) if waits else 0.0,
        small_wait_p95=waits[int(0.95 * (len(waits) - 1))] if waits else 0.0,
        small_finished=sum(1 for p in small if p.done),
        small_unbound=sum(1 for p in small if p.bound is None),
        cycle_ms=cycle_ms,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--cores", type=int, default=8)
    parser.add_argument("--gang", type=int, default=8)
    parser.add_argument("--gang-cpu", type=int, default=8)
    parser.add_argument("--gang-at", type=int, default=60)
    parser.add_argument("--gang-run", type=float, default=120.0)
    parser.add_argument("--small-cpu", type=int, default=4)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--run", type=float, nargs=2, default=(20.0, 60.0),
                        metavar=("MIN", "MAX"))
    parser.add_argument("--wait", type=float,
                        default=load_settings().scheduling.reserve_after_seconds,
                        help="reserve_after_seconds (the setting's value by default)")
    parser.add_argument("--horizon", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--matchers", default="embedded,fluxion",
                        help="which matchers (fluxion only with FLUENCE_FLUXION_LIB)")
    args = parser.parse_args()
    configure("WARNING")
    print(f"{args.nodes} nodes x {args.cores} cpu; a stream of {args.small_cpu}-cpu pods, one "
          f"every {args.every:g} s, running {args.run[0]:g}-{args.run[1]:g} s; at "
          f"{args.gang_at} s a gang of {args.gang} x {args.gang_cpu} cpu (runs "
          f"{args.gang_run:g} s); window {args.gang_at}-{args.horizon} s; reserve after "
          f"{args.wait:g} s")
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    for matcher in args.matchers.split(","):
        if matcher == "embedded":
            os.environ.pop("FLUENCE_FLUXION_LIB", None)
        elif matcher == "fluxion" and library:
            os.environ["FLUENCE_FLUXION_LIB"] = library
        else:
            continue
        print(f"\n{matcher}")
        print(f"  {'way':<17} {'gang placed':>11} {'util':>6} {'small wait':>11} "
              f"{'p95':>6} {'finished':>8} {'unbound':>7} {'cycle ms':>9} {'worst':>7}")
        for way in ("off", "reserve", "reserve+walltime"):
            found = run(way, args)
            gang = ("never" if found.gang_placed_after is None
                    else f"{found.gang_placed_after:.0f} s")
            print(f"  {way:<17} {gang:>11} {found.utilisation:>6.1%} "
                  f"{found.small_wait_mean:>9.1f} s {found.small_wait_p95:>4.0f} s "
                  f"{found.small_finished:>8} {found.small_unbound:>7} "
                  f"{statistics.median(found.cycle_ms):>9.2f} {max(found.cycle_ms):>7.1f}")
    if library:
        os.environ["FLUENCE_FLUXION_LIB"] = library


if __name__ == "__main__":
    main()
