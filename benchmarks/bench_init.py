"""The graph and the embedded matcher alone, at scale; and what Fluence keeps per node and pod.

    python benchmarks/bench_init.py [--nodes 5000,20000,60000] [--pods 2000]
        [--matchers embedded,fluxion] [--init-only]

**Initialisation.** Each node count runs in a fresh process: the nodes, as a
watch would deliver them (JSON decoded to dicts; scheduler_perf's default node: 4
CPUs, 32Gi, 110 pods, three zones), are made first; then the clock and the RSS
run over what ``Scheduler.start`` does with them: read each node
(:func:`~fluence_core.scheduler.view.read_node`), build the
:class:`~fluence_core.graph.ResourceGraph` and the matcher the plugins offer
(the embedded one, behind the shared pool), and the pool's index (built at the
first fractional match; one match is made). It prints seconds, the RSS the build
added and the process's peak RSS. Issue 31's goal: 60,000 nodes in under 30 s and
2 GiB. ``--matchers embedded,fluxion`` runs each count with each matcher, taking
turns: ``fluxion`` is real Fluxion (the JGF loaded into flux-sched's
``libreapi_cli.so``, from ``FLUENCE_FLUXION_LIB``), ``embedded`` runs with that
variable unset.

**Memory per object.** A :class:`Scheduler` over the in-memory cluster places
``--pods`` pods of 100m on N nodes, then twice as many pods, then on twice as many
nodes; the bytes reachable from the scheduler (its view, caches, graph, matcher,
records; not the cluster it talks to) are counted each time (a walk of the
object graph with ``sys.getsizeof``), and the differences give bytes per node and
per bound pod. Then every pod is deleted and the count is taken again: what stays
is what a cache kept of pods that are gone.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.resource_config import ResourceConfig
from fluence_core.scheduler.core import Scheduler, build_graph
from fluence_core.settings import load_settings
from fluence_core.testing_apiserver import ensure_namespace

ZONES = 3


def node(i: int) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    name = f"node-{i}"
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{i}", "resourceVersion": str(i + 1),
                         "labels": {"kubernetes.io/hostname": name,
                                    "topology.kubernetes.io/zone": f"zone-{i % ZONES}"}},
            "spec": {}, "status": {"capacity": capacity, "allocatable": capacity}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "schedulerName": "fluence",
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]}}


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def init_once(count: int) -> dict[str, float]:
    """Build the graph and matcher of ``count`` nodes in this process; the figures."""
    text = json.dumps([node(i) for i in range(count)])
    nodes = json.loads(text)
    del text
    gc.collect()
    settings = load_settings()
    manager = get_plugin_manager(settings)
    before = _status("VmRSS")
    started = time.perf_counter()
    graph, matcher = build_graph(nodes, ResourceConfig(), settings, manager)
    built = time.perf_counter() - started
    from fluence_core.matcher.jobspec import compute_jobspec
    from fluence_core.models import PodRequest
    first = time.perf_counter()
    matcher.match_allocate(compute_jobspec([PodRequest("p", cores=0, millicores=100)]))
    indexed = time.perf_counter() - first
    return {"nodes": count, "matcher": matcher.name, "vertices": graph.vertex_count(),
            "build_s": round(built, 2),
            "first_shared_match_s": round(indexed, 2),
            "rss_added_mib": round(_status("VmRSS") - before),
            "peak_rss_mib": round(_status("VmHWM"))}


def deep_size(root: Any, stop: tuple[Any, ...]) -> int:
    """Bytes of every object reachable from ``root``, not through ``stop`` objects, modules,
    classes or functions (those are shared code, not what the scheduler keeps)."""
    seen = {id(s) for s in stop}
    total = 0
    todo = [root]
    skip = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
            types.MethodType, logging.Logger)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


def kept(nodes: int, pods: int) -> tuple[int, int]:
    """(bytes the scheduler keeps with every pod bound, bytes once they are deleted)."""
    logging.getLogger("fluence").setLevel(logging.WARNING)
    cluster = FakeCluster()
    for i in range(nodes):
        cluster.create("nodes", node(i))
    ensure_namespace(cluster, "b")
    scheduler = Scheduler(cluster, load_settings())
    scheduler.start()
    for i in range(pods):
        cluster.create("pods", pod(f"p{i}"), "b")
    scheduler.pump()
    while scheduler.schedule_once():
        scheduler.pump()
    scheduler.pump()
    gc.collect()
    stop = (cluster, scheduler.manager, scheduler.metrics)
    full = deep_size(scheduler, stop)
    for i in range(pods):
        cluster.delete("pods", f"p{i}", "b", grace_period_seconds=0)
    scheduler.pump()
    scheduler.schedule_once()
    gc.collect()
    return full, deep_size(scheduler, stop)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="5000,20000,60000")
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--matchers", default="embedded",
                        help="comma-separated: embedded, fluxion (needs FLUENCE_FLUXION_LIB)")
    parser.add_argument("--init-only", action="store_true",
                        help="skip the memory-per-object part")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(init_once(args.one)))
        return
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    matchers = args.matchers.split(",")
    if "fluxion" in matchers and not library:
        raise SystemExit("--matchers fluxion needs FLUENCE_FLUXION_LIB (libreapi_cli.so)")
    print("| nodes | matcher | vertices | build s | first shared match s | RSS added MiB | "
          "peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for count in (int(n) for n in args.nodes.split(",")):
        for wanted in matchers:
            env = {k: v for k, v in os.environ.items() if k != "FLUENCE_FLUXION_LIB"}
            if wanted == "fluxion" and library:
                env["FLUENCE_FLUXION_LIB"] = library
            out = subprocess.run([sys.executable, __file__, "--one", str(count)], check=True,
                                 capture_output=True, text=True, env=env).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {r['nodes']} | {r['matcher']} | {r['vertices']} | {r['build_s']} | "
                  f"{r['first_shared_match_s']} | {r['rss_added_mib']} | {r['peak_rss_mib']} |",
                  flush=True)
    if args.init_only:
        return
    base_nodes, pods = 500, args.pods
    small, small_gone = kept(base_nodes, pods)
    more_pods, more_gone = kept(base_nodes, 2 * pods)
    more_nodes, _ = kept(2 * base_nodes, pods)
    print(f"\nkept with {pods} pods on {base_nodes} nodes: {small / 2**20:.1f} MiB")
    print(f"per bound pod: {(more_pods - small) / pods:.0f} bytes "
          f"({pods} -> {2 * pods} pods on {base_nodes} nodes)")
    print(f"per node: {(more_nodes - small) / base_nodes:.0f} bytes "
          f"({base_nodes} -> {2 * base_nodes} nodes, {pods} pods)")
    print(f"after deleting every pod: {small_gone / 2**20:.1f} MiB ({pods} pods had run), "
          f"{more_gone / 2**20:.1f} MiB ({2 * pods} had run): "
          f"{(more_gone - small_gone) / pods:.0f} bytes kept per pod that is gone")


if __name__ == "__main__":
    main()
