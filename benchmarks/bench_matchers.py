"""Benchmark the matchers side by side on one graph, one set of jobspecs, one run.

    python benchmarks/bench_matchers.py [--nodes 1000 --cores 64 --gpus 4 --repeat 20]

Each matcher runs in its own subprocess so that its memory is measured alone
(resident set growth while loading the graph). For every policy it times
allocate-then-cancel of: one core, one 64-core slot, and 10, 100 and 1000
whole-node slots. The Fluxion matcher joins when ``FLUENCE_FLUXION_LIB`` names
libreapi_cli.so and the fluence-fluxion plugin is installed. Figures are
reported with ratios against the embedded matcher measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

POLICIES = ["first", "low", "high", "lonode", "hinode"]


def _rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(kind: str, nodes: int, cores: int, gpus: int, repeat: int) -> dict[str, Any]:
    from fluence_core.graph import ResourceGraph
    from fluence_core.matcher.jobspec import compute_jobspec
    from fluence_core.models import NodeInfo, PodRequest

    infos = [NodeInfo(f"node{i}", cores, cores * 4096, gpus) for i in range(nodes)]
    jobs = {
        "1 core": compute_jobspec([PodRequest("p", cores=1)]),
        f"{cores}-core slot": compute_jobspec([PodRequest("p", cores=cores)]),
    }
    for count in (10, 100, 1000):
        if count <= nodes:
            jobs[f"{count} whole nodes"] = compute_jobspec(
                [PodRequest(f"p{i}", cores=cores) for i in range(count)]
            )

    def make(graph: ResourceGraph, policy: str) -> Any:
        if kind == "embedded":
            from fluence_core.matcher.embedded import EmbeddedMatcher

            return EmbeddedMatcher(graph, policy)
        from fluence_fluxion.matcher import FluxionMatcher, load_library

        return FluxionMatcher(graph, policy, load_library(os.environ["FLUENCE_FLUXION_LIB"]))

    results: dict[str, Any] = {"kind": kind}
    before = _rss_mib()
    started = time.perf_counter()
    graph = ResourceGraph(infos)
    matcher = make(graph, "first")
    results["load_s"] = time.perf_counter() - started
    results["rss_mib"] = _rss_mib() - before
    results["vertices"] = graph.vertex_count()
    timings: dict[str, dict[str, float]] = {}
    cancels: list[float] = []
    for policy in POLICIES:
        if policy != "first":
            del matcher
            matcher = make(graph, policy)
        for name, jobspec in jobs.items():
            runs = repeat if "1000" not in name else max(3, repeat // 4)
            samples = []
            for _ in range(runs):
                t0 = time.perf_counter()
                allocation = matcher.match_allocate(jobspec)
                t1 = time.perf_counter()
                if allocation is None:
                    raise SystemExit(f"{kind}/{policy}: {name} did not fit on an empty graph")
                samples.append(t1 - t0)
                t2 = time.perf_counter()
                matcher.cancel(allocation.jobid)
                cancels.append(time.perf_counter() - t2)
            timings.setdefault(name, {})[policy] = statistics.median(samples) * 1000
    results["match_ms"] = timings
    results["cancel_ms"] = statistics.median(cancels) * 1000
    return results


def _fluxion_available() -> str | None:
    if not os.environ.get("FLUENCE_FLUXION_LIB"):
        return "FLUENCE_FLUXION_LIB not set"
    try:
        import fluence_fluxion  # noqa: F401
    except ImportError:
        return "fluence-fluxion not installed"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--cores", type=int, default=64)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.nodes, args.cores, args.gpus, args.repeat)))
        return
    kinds = ["embedded"]
    missing = _fluxion_available()
    if missing is None:
        kinds.append("fluxion")
    else:
        print(f"(Fluxion matcher skipped: {missing})")
    results = {}
    for kind in kinds:
        command = [
            sys.executable,
            __file__,
            "--worker",
            kind,
            "--nodes",
            str(args.nodes),
            "--cores",
            str(args.cores),
            "--gpus",
            str(args.gpus),
            "--repeat",
            str(args.repeat),
        ]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[kind] = json.loads(output.strip().splitlines()[-1])
    _report(results, args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


def _report(results: dict[str, Any], args: argparse.Namespace) -> None:
    base = results["embedded"]
    other = results.get("fluxion")
    print(f"graph: {args.nodes} nodes x {args.cores} cores, {args.gpus} GPUs/node, "
          f"{base['vertices']} vertices")
    header = f"{'measure':34} {'embedded':>12}"
    if other:
        header += f" {'fluxion':>12} {'fluxion/embedded':>17}"
    print(header)

    def row(label: str, mine: float, theirs: float | None, unit: str) -> None:
        line = f"{label:34} {mine:>10.3f}{unit:>2}"
        if theirs is not None:
            line += f" {theirs:>10.3f}{unit:>2} {theirs / mine if mine else float('inf'):>16.1f}x"
        print(line)

    row("graph load (s)", base["load_s"], other and other["load_s"], "s")
    row("resident memory growth (MiB)", base["rss_mib"], other and other["rss_mib"], "M")
    row("cancel (ms)", base["cancel_ms"], other and other["cancel_ms"], "ms")
    for name, per_policy in base["match_ms"].items():
        for policy, value in per_policy.items():
            theirs = other["match_ms"][name][policy] if other else None
            row(f"{policy:7} {name} (ms)", value, theirs, "ms")


if __name__ == "__main__":
    main()
