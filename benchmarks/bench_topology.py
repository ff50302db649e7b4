"""Gangs kept inside racks: Fluence beside kube-scheduler 1.36 (TAS gate on), one API server.

    KUBEBUILDER_ASSETS=/usr/local/kubebuilder/bin \\
    KUBE_SCHEDULER=/usr/local/kubebuilder/bin/kube-scheduler \\
    [FLUENCE_FLUXION_LIB=/opt/flux/lib/flux/libreapi_cli.so] \\
        python benchmarks/bench_topology.py [--workload cpu|gpu] [--racks 12 --per-rack 6]
            [--use 0.85] [--seed 1] [--json bench-topology.json]

One fresh etcd + kube-apiserver. Its Nodes (no kubelets, as the e2e tier makes them)
carry zone, block and rack labels (``topology.kubernetes.io/zone``,
``example.com/block``, ``topology.kubernetes.io/rack``; rack values unique over the
cluster, since kube-scheduler names a domain by the label value alone). Then one seeded
stream of work, the same for every scheduler: gangs of mixed sizes (a
``scheduling.k8s.io/v1alpha2`` PodGroup with ``gang.minCount``, its pods joining by
``spec.schedulingGroup.podGroupName``), a share of them rack-required
(``spec.schedulingConstraints.topology[0].key`` = the rack label; only gangs that fit one
rack), and single pods, until the stream asks for ``--use`` of the cluster.

* ``cpu``: ``--racks`` racks of ``--per-rack`` nodes of 8 cores; gang pods of 4 cores
  (two to a node), gangs of 2 to 1.5 racks' worth; singles of 1 or 2 cores.
* ``gpu``: the GPU-rack replay, 33 racks of 18 nodes of 4 ``nvidia.com/gpu`` (and 64
  cores); gangs of 8 to 64 GPUs as pods of 4 GPUs (a node each); single-GPU pods.
  ``--racks`` scales it down.

Each scheduler runs as its own process (``benchmarks/peer.py``): kube-scheduler with the
API server's feature gates (GangScheduling and TopologyAwareWorkloadScheduling on; its
default profile then enables the GangScheduling and TopologyPlacementGenerator plugins,
nothing to configure), Fluence (``fluence up``) with the three levels in
``FLUENCE_TOPOLOGY_LEVELS`` and its embedded matcher, and, when ``FLUENCE_FLUXION_LIB`` is
set, Fluence again with real Fluxion. Each gets the empty cluster in turn: started, shown
ready by binding a probe pod, fed the stream at ``--rate`` items a second, and watched
(a pod list every 0.5 s) until every pod is bound or no binding came for ``--settle``
seconds; then it is stopped and its pods deleted.

Per scheduler: gangs placed (whole), partly placed, singles placed, use reached; per gang
its rack-span (racks used / the fewest racks its pods fit in), the lowest common level,
and its time to place (creation of its PodGroup to the last member seen bound, so
+-0.5 s); rack-required gangs placed across racks (violations); whole free racks at the
end. The rack-span share is given for gangs that fit one empty rack, split by whether
they stated the constraint. Figures are printed as a table and written to ``--json``
(with the names of the gangs each scheduler left unplaced). ``BENCH_KEEP_LOGS=<folder>``
keeps the schedulers' and the API server's logs there.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import topology_metrics as metrics  # noqa: E402
from peer import Peer, _in_parallel, delete_workload, kube_scheduler_peer  # noqa: E402

from fluence_core import names  # noqa: E402
from fluence_core.kube.client import KubeCluster  # noqa: E402
from fluence_core.testing_apiserver import (  # noqa: E402
    ApiServer, ensure_namespace, find_assets, find_kube_scheduler, start_apiserver,
)

ZONE = names.ZONE_LABEL
BLOCK = "example.com/block"
RACK = names.RACK_LABEL
LEVELS = ((ZONE, "zone"), (BLOCK, "block"), (RACK, "rack"))
TAS_GATE = "TopologyAwareWorkloadScheduling=true"
FLUXION_ENV = "FLUENCE_FLUXION_LIB"
RACKS_PER_BLOCK = 3
BLOCKS_PER_ZONE = 4
POLL = 0.5


# -- the cluster and the stream -------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """A workload: the nodes, and the pods its gangs and singles are made of."""

    name: str
    racks: int
    per_rack: int
    node_cores: int
    node_gpus: int
    gang_pod: tuple[int, int]
    """cores, GPUs of one gang pod"""
    gang_sizes: tuple[int, ...]
    """pods per gang, chosen uniformly"""
    singles: tuple[tuple[int, int], ...]
    """(cores, GPUs) of single pods, chosen uniformly"""
    single_share: float
    """share of the stream's demand that singles make"""

    @property
    def measure(self) -> str:
        return "gpus" if self.node_gpus else "cores"

    def demand(self, cores: int, gpus: int) -> int:
        return gpus if self.node_gpus else cores

    @property
    def capacity(self) -> int:
        return self.racks * self.per_rack * (self.node_gpus or self.node_cores)

    @property
    def gang_pods_per_node(self) -> int:
        cores, gpus = self.gang_pod
        return min(self.node_cores // cores, self.node_gpus // gpus if gpus else 1 << 30)

    @property
    def gang_pods_per_rack(self) -> int:
        return self.per_rack * self.gang_pods_per_node


def cpu_shape(racks: int, per_rack: int) -> Shape:
    rack_pods = per_rack * 2
    sizes = tuple(sorted({2, 3, 4, max(2, rack_pods // 2), rack_pods,
                          max(2, rack_pods * 3 // 2)}))
    return Shape("cpu", racks, per_rack, 8, 0, (4, 0), sizes, ((1, 0), (2, 0)), 0.25)


def gpu_shape(racks: int, per_rack: int) -> Shape:
    return Shape("gpu", racks, per_rack, 64, 4, (16, 4), (2, 4, 8, 12, 16), ((4, 1),), 0.3)


@dataclass
class Item:
    """One gang (a PodGroup and its pods) or one single pod, in stream order."""

    name: str
    pods: int
    cores: int
    gpus: int
    gang: bool
    rack_required: bool = False
    slice: int = 0
    """Pods per slice of a sliced gang (0: not sliced): block-required, each slice of that
    many consecutive pods inside one rack (Kueue's slice annotations on its PodGroup)."""


def make_stream(shape: Shape, use: float, constrained_share: float, seed: int,
                sliced_share: float = 0.0, slice_size: int = 0) -> list[Item]:
    """Gangs and singles in a seeded order until their demand reaches ``use`` of capacity.

    A single is drawn whenever singles are below ``shape.single_share`` of the demand; a
    gang that fits one empty rack is rack-required with ``constrained_share`` (a bigger
    one could never be placed so). With ``sliced_share``, a gang of several slices of
    ``slice_size`` pods that fits one empty block is sliced with that share instead (drawn
    only then, so the stream without slices stays the same for a seed).
    """
    rng = random.Random(seed)
    target = use * shape.capacity
    items: list[Item] = []
    demand = single_demand = 0
    while True:
        if single_demand < shape.single_share * max(demand, 1):
            cores, gpus = rng.choice(shape.singles)
            item = Item(f"s{len(items)}", 1, cores, gpus, gang=False)
        else:
            cores, gpus = shape.gang_pod
            size = rng.choice(shape.gang_sizes)
            required = rng.random() < constrained_share and size <= shape.gang_pods_per_rack
            item = Item(f"g{len(items)}", size, cores, gpus, gang=True, rack_required=required)
            if (sliced_share and slice_size and size > slice_size and size % slice_size == 0
                    and size <= RACKS_PER_BLOCK * shape.gang_pods_per_rack
                    and rng.random() < sliced_share):
                item.rack_required, item.slice = False, slice_size
        amount = item.pods * shape.demand(cores, gpus)
        if demand + amount > target:
            return items
        items.append(item)
        demand += amount
        if not item.gang:
            single_demand += amount


def node_body(shape: Shape, index: int) -> dict[str, Any]:
    rack = index // shape.per_rack
    block = rack // RACKS_PER_BLOCK
    zone = block // BLOCKS_PER_ZONE
    capacity = {"cpu": str(shape.node_cores), "memory": f"{shape.node_cores * 4}Gi",
                "pods": "110"}
    if shape.node_gpus:
        capacity[names.GPU_RESOURCE] = str(shape.node_gpus)
    name = f"n{index}"
    return {"metadata": {"name": name, "labels": {
        names.HOSTNAME_LABEL: name, ZONE: f"z{zone}", BLOCK: f"b{block}", RACK: f"r{rack}"}},
        "status": {"capacity": capacity, "allocatable": capacity}}


def pod_body(name: str, scheduler: str | None, cores: int, gpus: int,
             group: str | None) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": str(cores), "memory": "256Mi"}
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        requests[names.GPU_RESOURCE] = str(gpus)
        resources["limits"] = {names.GPU_RESOURCE: str(gpus)}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause",
                                            "resources": resources}],
                            "terminationGracePeriodSeconds": 0}
    if scheduler:
        spec["schedulerName"] = scheduler
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"metadata": {"name": name}, "spec": spec}


def pod_group_body(item: Item) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": item.pods}}}
    metadata: dict[str, Any] = {"name": item.name}
    if item.rack_required:
        spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    if item.slice:
        # kube-scheduler 1.36 reads the block (it has no slices); Fluence reads both
        spec["schedulingConstraints"] = {"topology": [{"key": BLOCK}]}
        metadata["annotations"] = {
            names.KUEUE_REQUIRED_TOPOLOGY_ANNOTATION: BLOCK,
            names.KUEUE_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: RACK,
            names.KUEUE_SLICE_SIZE_ANNOTATION: str(item.slice)}
    return {"metadata": metadata, "spec": spec}


# -- the schedulers ----------------------------------------------------------------------------

def fluence(kubeconfig: Path, name: str, fluxion: str | None) -> Peer:
    """``fluence up`` with the three levels; with ``fluxion``, real Fluxion matches."""
    def command(workdir: Path, limits: tuple[float, int]) -> tuple[list[str], dict[str, str]]:
        env = {"KUBECONFIG": str(kubeconfig), "FLUENCE_KUBE_QPS": str(limits[0]),
               "FLUENCE_KUBE_BURST": str(limits[1]), "FLUENCE_LEADER_ELECT": "false",
               "FLUENCE_METRICS_PORT": "0",
               "FLUENCE_TOPOLOGY_LEVELS": ",".join(label for label, _ in LEVELS)}
        if fluxion:
            env[FLUXION_ENV] = fluxion
        return [sys.executable, "-m", "fluence_core.cli", "up"], env
    return Peer(name, "fluence", command)


# -- one run --------------------------------------------------------------------------------

@dataclass
class Result:
    scheduler: str
    workload: str
    racks: int
    per_rack: int
    items: int
    gangs: int
    gangs_placed: int = 0
    gangs_partial: int = 0
    singles: int = 0
    singles_placed: int = 0
    use: float = 0.0
    """placed demand / capacity at the end"""
    whole_free_racks: int = 0
    violations: int = 0
    """rack-required gangs bound across racks"""
    span_one_required: tuple[int, int] = (0, 0)
    """(rack-span 1.0, placed) among rack-required gangs that fit one empty rack"""
    span_one_free: tuple[int, int] = (0, 0)
    """the same among gangs with no constraint"""
    mean_span_multi: float | None = None
    """mean rack-span of placed gangs bigger than a rack"""
    levels: dict[str, int] = field(default_factory=dict)
    """placed gangs by their lowest common level"""
    place_p50: float = 0.0
    place_p95: float = 0.0
    seconds: float = 0.0
    """first creation to the last binding seen"""
    unplaced: list[str] = field(default_factory=list)
    """gangs not placed whole"""
    sliced_placed: tuple[int, int] = (0, 0)
    """(placed whole, in the stream) of the sliced gangs"""
    unsliced_placed: tuple[int, int] = (0, 0)
    """the same of the other gangs"""
    slices_whole: tuple[int, int] = (0, 0)
    """(slices inside one rack, slices) of the placed sliced gangs"""
    sliced_across_blocks: int = 0
    """placed sliced gangs bound across blocks"""
    error: str = ""


class Bench:
    """The API server with its nodes; each scheduler takes the same stream in turn."""

    def __init__(self, server: ApiServer, shape: Shape, rate: float, settle: float,
                 workdir: Path) -> None:
        self.server = server
        self.kube: KubeCluster = server.cluster(qps=5000, burst=5000)
        kube = self.kube
        self.shape = shape
        self.rate = rate
        self.settle = settle
        self.workdir = workdir
        bodies = [node_body(shape, i) for i in range(shape.racks * shape.per_rack)]
        _in_parallel(lambda b: kube.create("nodes", b), bodies)
        self.labels = {b["metadata"]["name"]: b["metadata"]["labels"] for b in bodies}
        self.rack_of = {n: labels[RACK] for n, labels in self.labels.items()}
        self.racks: dict[str, list[str]] = {}
        for node, rack in self.rack_of.items():
            self.racks.setdefault(rack, []).append(node)

    def check_gate(self) -> None:
        """The API server keeps a PodGroup's topology constraint (it drops it without the
        TAS gate, and both schedulers would then see unconstrained gangs)."""
        ensure_namespace(self.kube, "gate-check")
        made = self.kube.create("podgroups", pod_group_body(
            Item("check", 2, 1, 0, gang=True, rack_required=True)), "gate-check")
        if not made.get("spec", {}).get("schedulingConstraints"):
            raise SystemExit("the API server dropped spec.schedulingConstraints: "
                             f"run it with {TAS_GATE}")
        self.kube.delete("podgroups", "check", "gate-check")

    def run(self, peer: Peer, items: list[Item]) -> Result:
        namespace = f"{peer.name}-{int(time.time()) % 10**6}"
        ensure_namespace(self.kube, namespace)
        result = Result(peer.name, self.shape.name, self.shape.racks, self.shape.per_rack,
                        len(items), sum(1 for i in items if i.gang),
                        singles=sum(1 for i in items if not i.gang))
        with peer.running(self.server, (5000.0, 5000), self.workdir) as process:
            self.kube.create("pods", pod_body("probe", peer.scheduler_name, 1, 0, None),
                             namespace)
            if not self.wait_quiet(namespace, {"probe"}, 120, process):
                result.error = f"bound no probe pod (log in {self.workdir})"
                self.clean(namespace)
                return result
            self.kube.delete("pods", "probe", namespace, grace_period_seconds=0)
            bound: dict[str, tuple[str, float]] = {}
            watcher = threading.Thread(target=self.watch, args=(namespace, bound),
                                       daemon=True)
            self.stop = threading.Event()
            watcher.start()
            created = self.feed(peer, items, namespace)
            names_all = {f"{i.name}-{m}" if i.gang else i.name
                         for i in items for m in range(i.pods)}
            self.wait_settled(bound, names_all, process)
            self.stop.set()
            watcher.join()
            if process.poll() is not None:
                result.error = f"exited with {process.returncode} (log in {self.workdir})"
        self.score(result, items, created, bound)
        self.clean(namespace)
        return result

    def feed(self, peer: Peer, items: list[Item], namespace: str) -> dict[str, float]:
        """Create the stream at ``rate`` items a second; when each item was created."""
        created: dict[str, float] = {}
        started = time.monotonic()
        for index, item in enumerate(items):
            delay = started + index / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            created[item.name] = time.time()
            if item.gang:
                self.kube.create("podgroups", pod_group_body(item), namespace)
                pods = [pod_body(f"{item.name}-{m}", peer.scheduler_name, item.cores,
                                 item.gpus, item.name) for m in range(item.pods)]
                _in_parallel(lambda p: self.kube.create("pods", p, namespace), pods)
            else:
                self.kube.create("pods", pod_body(item.name, peer.scheduler_name, item.cores,
                                                  item.gpus, None), namespace)
        return created

    def watch(self, namespace: str, bound: dict[str, tuple[str, float]]) -> None:
        """Every :data:`POLL` seconds, note each newly bound pod's node and the time."""
        while not self.stop.is_set():
            now = time.time()
            for pod in self.kube.list("pods", namespace).items:
                name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
                if node and name not in bound:
                    bound[name] = (node, now)
            self.stop.wait(POLL)

    def wait_settled(self, bound: dict[str, tuple[str, float]], wanted: set[str],
                     process: subprocess.Popen[bytes]) -> None:
        last_count, last_change = -1, time.monotonic()
        while process.poll() is None:
            count = len(bound)
            if wanted <= bound.keys():
                return
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            elif time.monotonic() - last_change > self.settle:
                return
            time.sleep(POLL)

    def wait_quiet(self, namespace: str, wanted: set[str], timeout: float,
                   process: subprocess.Popen[bytes]) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process.poll() is None:
            pods = self.kube.list("pods", namespace).items
            if wanted <= {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}:
                return True
            time.sleep(POLL)
        return False

    def score(self, result: Result, items: list[Item], created: dict[str, float],
              bound: dict[str, tuple[str, float]]) -> None:
        shape = self.shape
        used_nodes = {node for node, _ in bound.values()}
        result.whole_free_racks = metrics.whole_free_racks(used_nodes, self.racks)
        placed_demand = 0
        times: list[float] = []
        levels: Counter[str] = Counter()
        required, free = [0, 0], [0, 0]
        multi: list[float] = []
        last = 0.0
        sliced, unsliced, whole = [0, 0], [0, 0], [0, 0]
        for item in items:
            if item.gang:
                (sliced if item.slice else unsliced)[1] += 1
            names_ = [f"{item.name}-{m}" for m in range(item.pods)] if item.gang else [item.name]
            placed = [bound[n] for n in names_ if n in bound]
            placed_demand += len(placed) * shape.demand(item.cores, item.gpus)
            if placed:
                last = max(last, max(t for _, t in placed))
            if not item.gang:
                result.singles_placed += bool(placed)
                continue
            if not placed:
                result.unplaced.append(item.name)
                continue
            if len(placed) < item.pods:
                result.gangs_partial += 1
                result.unplaced.append(item.name)
                continue
            result.gangs_placed += 1
            nodes = [node for node, _ in placed]
            (sliced if item.slice else unsliced)[0] += 1
            if item.slice:
                one, cuts = metrics.whole_slices(nodes, self.rack_of, item.slice)
                whole[0] += one
                whole[1] += cuts
                if len({self.labels[n][BLOCK] for n in nodes}) > 1:
                    result.sliced_across_blocks += 1
            times.append(max(t for _, t in placed) - created[item.name])
            levels[metrics.lowest_common_level(nodes, self.labels, LEVELS)] += 1
            span = metrics.rack_span(nodes, self.rack_of, shape.gang_pods_per_rack)
            racks_used = len({self.rack_of[n] for n in nodes})
            if item.rack_required and racks_used > 1:
                result.violations += 1
            if item.pods <= shape.gang_pods_per_rack:
                tally = required if item.rack_required else free
                tally[0] += span == 1.0
                tally[1] += 1
            else:
                multi.append(span)
        result.use = round(placed_demand / shape.capacity, 3)
        result.sliced_placed = (sliced[0], sliced[1])
        result.unsliced_placed = (unsliced[0], unsliced[1])
        result.slices_whole = (whole[0], whole[1])
        result.span_one_required = (required[0], required[1])
        result.span_one_free = (free[0], free[1])
        result.mean_span_multi = round(statistics.mean(multi), 2) if multi else None
        result.levels = dict(levels)
        if times:
            ordered = sorted(times)
            result.place_p50 = round(statistics.median(ordered), 2)
            result.place_p95 = round(ordered[min(len(ordered) - 1,
                                                 int(0.95 * (len(ordered) - 1) + 0.5))], 2)
        if created and last:
            result.seconds = round(last - min(created.values()), 1)

    def clean(self, namespace: str) -> None:
        """Delete the run's pods and PodGroups, and wait until the pods are gone."""
        delete_workload(self.kube, namespace)
        deadline = time.monotonic() + 120
        while self.kube.list("pods", namespace).items and time.monotonic() < deadline:
            time.sleep(POLL)


# -- the table --------------------------------------------------------------------------------

def _share(pair: tuple[int, int]) -> str:
    ones, total = pair
    return f"{ones}/{total} ({100 * ones / total:.0f} %)" if total else "none placed"


def table(results: list[Result], items: list[Item], shape: Shape) -> str:
    fits = [i for i in items if i.gang and i.pods <= shape.gang_pods_per_rack]
    heading = (f"{shape.name}: {shape.racks} racks x {shape.per_rack} nodes "
               f"({shape.racks * shape.per_rack} nodes, {shape.capacity} {shape.measure}); "
               f"stream of {len(items)} items: {sum(i.gang for i in items)} gangs "
               f"({sum(i.rack_required for i in items)} rack-required, {len(fits)} fit one "
               f"rack), {sum(not i.gang for i in items)} singles")
    rows: list[tuple[str, list[str]]] = [
        ("gangs placed whole", [f"{r.gangs_placed}/{r.gangs}" for r in results]),
        ("gangs partly placed", [str(r.gangs_partial) for r in results]),
        ("singles placed", [f"{r.singles_placed}/{r.singles}" for r in results]),
        (f"use reached ({shape.measure})", [f"{100 * r.use:.1f} %" for r in results]),
        ("rack-required gangs across racks (violations)",
         [str(r.violations) for r in results]),
        ("rack-span 1.0, rack-required gangs that fit a rack",
         [_share(r.span_one_required) for r in results]),
        ("rack-span 1.0, unconstrained gangs that fit a rack",
         [_share(r.span_one_free) for r in results]),
        ("mean rack-span, gangs bigger than a rack",
         [str(r.mean_span_multi) if r.mean_span_multi is not None else "-" for r in results]),
        ("lowest common level (node/rack/block/zone/cluster)",
         ["/".join(str(r.levels.get(k, 0)) for k in ("node", "rack", "block", "zone",
                                                      "cluster")) for r in results]),
        ("whole free racks at the end", [str(r.whole_free_racks) for r in results]),
        ("time to place a gang, p50 / p95 s", [f"{r.place_p50} / {r.place_p95}"
                                               for r in results]),
        ("first creation to last binding, s", [str(r.seconds) for r in results]),
    ]
    if any(i.slice for i in items):
        rows += [
            ("sliced gangs placed whole", [_share(r.sliced_placed) for r in results]),
            ("other gangs placed whole", [_share(r.unsliced_placed) for r in results]),
            ("slices whole in one rack", [_share(r.slices_whole) for r in results]),
            ("sliced gangs across blocks (violations)",
             [str(r.sliced_across_blocks) for r in results]),
        ]
    if any(r.error for r in results):
        rows.append(("error", [r.error or "-" for r in results]))
    lines = [heading, "", "| | " + " | ".join(r.scheduler for r in results) + " |",
             "|---|" + "---|" * len(results)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--racks", type=int, help="racks (default: cpu 12, gpu 33)")
    parser.add_argument("--per-rack", type=int, help="nodes a rack (default: cpu 6, gpu 18)")
    parser.add_argument("--use", type=float, default=0.85,
                        help="share of the cluster the stream asks for")
    parser.add_argument("--constrained", type=float, default=0.5,
                        help="share of gangs that are rack-required")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sliced", type=float, default=0.0,
                        help="share of the gangs of several slices that are sliced")
    parser.add_argument("--slice", type=int, default=0,
                        help="pods per rack slice (default: half a rack of gang pods)")
    parser.add_argument("--rate", type=float, default=10.0, help="stream items a second")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds with no new binding that end a run")
    parser.add_argument("--schedulers", default="kube-scheduler,fluence,fluence-fluxion",
                        help="which to run (fluence-fluxion only with FLUENCE_FLUXION_LIB)")
    parser.add_argument("--json", type=Path, default=Path("bench-topology.json"))
    args = parser.parse_args()
    if args.workload == "cpu":
        shape = cpu_shape(args.racks or 12, args.per_rack or 6)
    else:
        shape = gpu_shape(args.racks or 33, args.per_rack or 18)
    fluxion = os.environ.pop(FLUXION_ENV, None)  # the embedded column must not load it
    assets, reason = find_assets()
    if assets is None:
        raise SystemExit(f"needs a real API server: {reason}")
    binary = find_kube_scheduler(assets)
    wanted = args.schedulers.split(",")
    if "kube-scheduler" in wanted and binary is None:
        raise SystemExit("no kube-scheduler: set KUBE_SCHEDULER")
    if "fluence-fluxion" in wanted and not fluxion:
        print(f"(no {FLUXION_ENV}: Fluence with real Fluxion is left out)", flush=True)
        wanted.remove("fluence-fluxion")
    items = make_stream(shape, args.use, args.constrained, args.seed, args.sliced,
                        args.slice or max(1, shape.gang_pods_per_rack // 2))
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp, \
            start_apiserver(assets, Path(tmp), controller_manager=False,
                            apiserver_flags=[f"--feature-gates={TAS_GATE}"]) as server:
        bench = Bench(server, shape, args.rate, args.settle, Path(tmp))
        bench.check_gate()
        kubeconfig = server.kubeconfig()
        peers = {"fluence": fluence(kubeconfig, "fluence", None),
                 "fluence-fluxion": fluence(kubeconfig, "fluence-fluxion", fluxion)}
        if binary is not None:
            peers["kube-scheduler"] = kube_scheduler_peer(binary, kubeconfig)
        for name in wanted:
            started = time.monotonic()
            result = bench.run(peers[name], items)
            results.append(result)
            print(f"{name}: {result.gangs_placed}/{result.gangs} gangs, "
                  f"{result.violations} violations, {result.whole_free_racks} free racks, "
                  f"{time.monotonic() - started:.0f} s  {result.error}", flush=True)
            args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
        if os.environ.get("BENCH_KEEP_LOGS"):
            keep = Path(os.environ["BENCH_KEEP_LOGS"])
            keep.mkdir(parents=True, exist_ok=True)
            for log in Path(tmp).glob("*.log"):
                if log.name != "audit.log":
                    (keep / log.name).write_bytes(log.read_bytes())
    print(table(results, items, shape))


if __name__ == "__main__":
    main()
