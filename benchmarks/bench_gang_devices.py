"""A rack-required gang whose members use DRA claims: matched jointly with its devices,
against the same gang placed member by member, in one run.

    python benchmarks/bench_gang_devices.py [--racks 4 --per-rack 16 --devices 8
                                             --gang 16 --per-pod 8 --repeat 5]

The cluster (in memory, the scheduler's whole cycle with its claim writes): ``--racks``
racks of ``--per-rack`` nodes of 16 cores, each node with ``--devices`` GPUs of one
driver. The gang: ``--gang`` pods of 1 core in one PodGroup required inside one rack,
each with its own claim of ``--per-pod`` GPUs. Each way places the gang ``--repeat``
times on a fresh cluster and reports the median wall time of the cycle that places it
(pump, match, claim writes and binds):

* ``joint``: the embedded matcher takes each member's devices in its search;
* ``member by member``: the same scheduler with the joint match switched off (the
  path Fluxion takes), the baseline of the ratio.

Both must place the whole gang inside one rack with no device allocated twice; the
script stops with an error otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from fluence_core import names
from fluence_core.kube.api import (
    DEVICE_CLASSES, NODES, PODGROUPS, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES,
)
from fluence_core.kube.fake import FakeCluster
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.resource_config import parse_resource_config
from fluence_core.testing import (
    SchedulerHarness, claim_entries, make_device, make_device_class_dict,
    make_device_request, make_node_dict, make_pod_dict, make_pod_group_dict,
    make_resource_claim_dict, make_resource_slice_dict,
)

DRIVER = "gpu.example.com"


def _cluster(args: argparse.Namespace) -> SchedulerHarness:
    cluster = FakeCluster()
    for rack in range(args.racks):
        for index in range(args.per_rack):
            name = f"r{rack}-n{index}"
            cluster.create(NODES, make_node_dict(name, 16, "64Gi", pods=None,
                                                 labels={names.RACK_LABEL: f"r{rack}"}))
            cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
                f"{name}-gpus", DRIVER, [make_device(f"gpu{i}", {"model": "a100"})
                                         for i in range(args.devices)], node=name))
    cluster.create(DEVICE_CLASSES, make_device_class_dict("gpu", f'device.driver == "{DRIVER}"'))
    config = parse_resource_config(f"topology:\n  levels: [{names.RACK_LABEL}]\n", "bench")
    harness = SchedulerHarness(cluster, config)
    cluster.create(PODGROUPS, make_pod_group_dict("g", args.gang, "default",
                                                  topology=[names.RACK_LABEL]), "default")
    for index in range(args.gang):
        cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
            f"c{index}", [make_device_request("r", "gpu", args.per_pod)]), "default")
        cluster.create(PODS, make_pod_dict(f"m{index}", "1", group="g",
                                           resourceClaims=claim_entries(gpu=f"c{index}")),
                       "default")
    return harness


def _check(harness: SchedulerHarness, args: argparse.Namespace) -> None:
    nodes = [harness.node_of(f"m{i}") for i in range(args.gang)]
    if None in nodes or len({str(n).split("-")[0] for n in nodes}) != 1:
        raise SystemExit(f"the gang was not placed whole in one rack: {nodes}")
    taken: list[Any] = []
    for index in range(args.gang):
        claim = harness.cluster.get(RESOURCE_CLAIMS, f"c{index}", "default") or {}
        results = claim["status"]["allocation"]["devices"]["results"]
        taken += [(r["pool"], r["device"]) for r in results]
    if len(taken) != len(set(taken)) or len(taken) != args.gang * args.per_pod:
        raise SystemExit("devices were allocated twice, or not all")


def _time(args: argparse.Namespace, joint: bool) -> float:
    EmbeddedMatcher.matches_devices = joint
    try:
        harness = _cluster(args)
        started = time.perf_counter()
        harness.cycle()
        elapsed = time.perf_counter() - started
    finally:
        EmbeddedMatcher.matches_devices = True
    _check(harness, args)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--per-rack", type=int, default=16)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--gang", type=int, default=16)
    parser.add_argument("--per-pod", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeat):
        for joint in (False, True):  # interleaved: the machine's load falls on both
            times[joint].append(_time(args, joint))
    baseline = statistics.median(times[False])
    print(f"{args.racks} racks x {args.per_rack} nodes x {args.devices} GPUs; gang of "
          f"{args.gang} pods x {args.per_pod} GPUs, rack required; {args.repeat} runs")
    print(f"{'way':<18} {'median cycle':>14} {'ratio':>7}")
    for label, joint in (("member by member", False), ("joint", True)):
        median = statistics.median(times[joint])
        print(f"{label:<18} {median * 1000:>11.1f} ms {median / baseline:>6.2f}x")


if __name__ == "__main__":
    main()
