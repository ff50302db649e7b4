"""A big rack-constrained gang on a big cluster: how long the match takes, against the same
gang unconstrained, in one run.

    python benchmarks/bench_rack_gang.py [--nodes 5000 --per-rack 100 --gang 1000 --repeat 5]

The cluster: ``--nodes`` nodes of ``--cores`` cores, in zones of 10 racks of ``--per-rack``
nodes (levels zone and rack). Before timing, singles of 2-16 cores fill every rack to a
different level (0 % to ``--fill`` of its cores, rack by rack), so the racks differ and
the best-fit choice has work to do. Then the gang (``--gang`` pods of ``--pod-cores``
cores) is matched and cancelled ``--repeat`` times in each way:

* ``rack required``: the PodGroup names the rack label (levels in the graph);
* ``default``: no constraint, levels in the graph (best fit: narrowest level first);
* ``flat``: no constraint, no levels (the graph of before), the baseline of the ratios;
* ``sliced``: zone required, in slices of ``--slice`` pods each inside one rack (Kueue's
  slice annotations; only when ``--gang`` is a multiple of ``--slice``); its row adds the
  share of slices found whole in one rack.

Each way reports the median and worst wall time of ``match_group`` (jobspecs, match and
reading back a node per pod), the median CPU time of this process over the same call
(Fluxion matches in-process, so it is counted; on shared cores wall time waits for a core,
CPU time does not), the wall ratio to ``flat``, and where the gang went (racks used).
``--matchers`` picks the matchers (``embedded,fluxion``; Fluxion only with
``FLUENCE_FLUXION_LIB``), ``--ways`` the ways (``sliced``: that and ``flat``).
Then ``--singles`` lone pods (1 core, and 500m from the shared pool) are matched on the
empty cluster behind the shared pool, as the scheduler runs them, with levels and flat:
what the default best fit costs a single pod. The Fluxion matcher joins when
``FLUENCE_FLUXION_LIB`` names libreapi_cli.so.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from typing import Any, Callable

from fluence_core import names
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.group import GroupMatch, match_group
from fluence_core.matcher.pooled import pooled
from fluence_core.models import Group, NodeInfo, PodRequest
from fluence_core.topology import Constraint, Level, SliceLayer

ZONE = Level(names.ZONE_LABEL, "zone")
RACK = Level(names.RACK_LABEL, "rack")


def cluster(nodes: int, per_rack: int, cores: int) -> list[NodeInfo]:
    return [
        NodeInfo(f"n{i}", cores, cores * 4096, labels={
            ZONE.label: f"z{i // (per_rack * 10)}", RACK.label: f"r{i // per_rack}"})
        for i in range(nodes)
    ]


def fill(graph: ResourceGraph, matcher: Matcher, fill_to: float, seed: int) -> int:
    """Singles pinned rack by rack, each rack to its own share of ``fill_to``."""
    rng = random.Random(seed)
    racks: dict[str, list[str]] = {}
    for node in graph.nodes:
        racks.setdefault(node.labels[RACK.label], []).append(node.name)
    placed = 0
    for index, (rack, members) in enumerate(sorted(racks.items())):
        share = fill_to * index / max(1, len(racks) - 1)
        target = int(share * sum(graph.node(n).cores for n in members))
        used = 0
        while used < target:
            size = rng.randint(2, 16)
            pod = PodRequest(f"s{placed}", cores=size,
                             allowed=frozenset([members[placed % len(members)]]))
            if isinstance(match_group(Group(f"s{placed}", (pod,)), graph, matcher), GroupMatch):
                used += size
            placed += 1
            if placed > 10 * len(graph.nodes):
                break
    return placed


def timed(graph: ResourceGraph, matcher: Matcher, group: Group, repeat: int) -> dict[str, Any]:
    times, cpu = [], []
    racks: set[int] = set()
    slices = ""
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = match_group(group, graph, matcher)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        if not isinstance(result, GroupMatch):
            return {"placed": False, "reason": result.reason, "median_s": statistics.median(times)}
        racks.add(len({graph.node(p.node).labels.get(RACK.label) for p in
                       result.placements.values() if p.node}))
        if result.slices:
            whole = sum(len({rack_of(graph, result.placements[pod].node) for pod in s.pods})
                        == 1 for s in result.slices)
            slices = f"{whole}/{len(result.slices)}"
        for allocation in result.allocations.values():
            matcher.cancel(allocation.jobid)
    return {"placed": True, "median_s": statistics.median(times), "worst_s": max(times),
            "cpu_s": statistics.median(cpu), "racks_used": sorted(racks),
            "slices_whole": slices}


def rack_of(graph: ResourceGraph, node: str | None) -> str | None:
    return graph.node(node).labels.get(RACK.label) if node else None


def run(make: Callable[[ResourceGraph], Matcher], args: argparse.Namespace) -> dict[str, Any]:
    infos = cluster(args.nodes, args.per_rack, args.cores)
    pods = tuple(PodRequest(f"g{i}", cores=args.pod_cores) for i in range(args.gang))
    ways = {
        "rack required": ((ZONE, RACK), Constraint(required=(RACK.label,))),
        "default": ((ZONE, RACK), Constraint()),
        "flat": ((), Constraint()),
    }
    if args.slice and args.gang % args.slice == 0:
        ways["sliced"] = ((ZONE, RACK), Constraint(
            required=(ZONE.label,), slices=(SliceLayer(RACK.label, args.slice),)))
    found = {}
    chosen = [way.strip() for way in args.ways.split(",")] if args.ways else list(ways)
    for way, (levels, constraint) in ways.items():
        if way not in chosen and way != "flat":  # flat is every ratio's baseline
            continue
        graph = ResourceGraph(infos, levels=levels)
        matcher = make(graph)
        singles = fill(graph, matcher, args.fill, args.seed)
        found[way] = timed(graph, matcher, Group("gang", pods, topology=constraint),
                           args.repeat)
        found[way]["singles"] = singles
    return found


def singles(make: Callable[[ResourceGraph], Matcher], args: argparse.Namespace) -> None:
    infos = cluster(args.nodes, args.per_rack, args.cores)
    print(f"  {args.singles} singles, ms per pod:  {'levels':>8} {'flat':>8} {'ratio':>6}")
    for kind, pod in (("1 core", dict(cores=1)), ("500m", dict(cores=0, millicores=500))):
        took = {}
        for way, levels in (("levels", (ZONE, RACK)), ("flat", ())):
            graph = ResourceGraph(infos, levels=levels)
            matcher = pooled(make(graph), graph)
            started = time.perf_counter()
            for i in range(args.singles):
                one = PodRequest(f"s{i}", memory_mib=256, **pod)  # type: ignore[arg-type]
                if not isinstance(match_group(Group(f"s{i}", (one,)), graph, matcher),
                                  GroupMatch):
                    raise SystemExit(f"single {i} ({kind}) did not fit")
            took[way] = (time.perf_counter() - started) / args.singles
        print(f"  {kind:<30} {took['levels'] * 1000:>8.2f} {took['flat'] * 1000:>8.2f} "
              f"{took['levels'] / took['flat']:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--per-rack", type=int, default=100)
    parser.add_argument("--cores", type=int, default=32)
    parser.add_argument("--gang", type=int, default=1000)
    parser.add_argument("--pod-cores", type=int, default=2)
    parser.add_argument("--fill", type=float, default=0.6)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--slice", type=int, default=16,
                        help="pods per rack slice in the sliced way (0: no sliced way)")
    parser.add_argument("--singles", type=int, default=500)
    parser.add_argument("--ways", default="",
                        help="the ways to time, comma-separated (default: all; flat, the "
                             "baseline, always)")
    parser.add_argument("--policy", default="first", help="the matchers' policy")
    parser.add_argument("--matchers", default="embedded,fluxion",
                        help="which matchers (fluxion only with FLUENCE_FLUXION_LIB)")
    args = parser.parse_args()
    print(f"{args.nodes} nodes x {args.cores} cores, racks of {args.per_rack}, zones of 10 "
          f"racks; gang of {args.gang} x {args.pod_cores}-core pods; racks filled 0-"
          f"{args.fill:.0%}; {args.repeat} matches each; policy {args.policy}")
    wanted = args.matchers.split(",")
    makers: dict[str, Callable[[ResourceGraph], Matcher]] = {}
    if "embedded" in wanted:
        makers["embedded"] = lambda graph: EmbeddedMatcher(graph, args.policy)
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    if library and "fluxion" in wanted:
        from fluence_fluxion.matcher import FluxionMatcher, load_library

        lib = load_library(library)
        makers["fluxion"] = lambda graph: FluxionMatcher(graph, args.policy, lib)
    for kind, make in makers.items():
        found = run(make, args)
        base = found["flat"]["median_s"]
        print(f"\n{kind}")
        print(f"  {'way':<14} {'placed':>6} {'median ms':>10} {'worst ms':>9} {'cpu ms':>7}"
              f" {'x flat':>7}  racks used")
        for way, row in found.items():
            if not row["placed"]:
                print(f"  {way:<14} {'no':>6} {row['median_s'] * 1000:>10.1f}  {row['reason']}")
                continue
            print(f"  {way:<14} {'yes':>6} {row['median_s'] * 1000:>10.1f} "
                  f"{row['worst_s'] * 1000:>9.1f} {row['cpu_s'] * 1000:>7.1f} "
                  f"{row['median_s'] / base:>7.2f}  "
                  f"{row['racks_used']}"
                  + (f"  slices whole in one rack {row['slices_whole']}"
                     if row["slices_whole"] else ""))
        if args.singles:
            singles(make, args)


if __name__ == "__main__":
    main()
